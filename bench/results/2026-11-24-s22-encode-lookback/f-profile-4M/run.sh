#!/usr/bin/env bash
# Session 22, eighth and ninth device calls: profiles of the kept trees (4aaf4cb), 4 MiB and 256 MiB of bf16.
export OUT=$OUT/p4; mkdir -p $OUT; bash scripts/profile.sh 4M --codec lossless -d bf16 > $OUT/summary.txt 2>&1
export OUT=${OUT%/p4}/p256; mkdir -p $OUT; bash scripts/profile.sh 256M --codec lossless -d bf16 > $OUT/summary.txt 2>&1
