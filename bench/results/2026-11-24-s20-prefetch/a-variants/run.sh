#!/usr/bin/env bash
# Session 20, third device call: L2/L1 prefetches for the general encoder and decoder, and the
# window decoder at 64 registers, against dd925e6 (old) and this tree (new: the unused helper).
set -u
OUT=${OUT:-/tmp/cclz-out}
cat .data/layer1_act.bin .data/layer6_act.bin .data/layer1_wgrad.bin .data/layer6_wgrad.bin > /tmp/one.bin
for i in $(seq 8); do cat /tmp/one.bin; done | head -c $((256 * 1048576)) > /tmp/real256.bin
bash scripts/ab-codec.sh .devrun/old.tar.gz 'All/LosslessGpu.*_n16777216_*:LosslessGpuV2*' bench/results/2026-11-24-s20-prefetch/a-variants/configs \
  dthis_ethis=.devrun/dthisethis.tar.gz dnext_enext=.devrun/dnextenext.tar.gz lb8=.devrun/lb8.tar.gz \
  dloop_l1=.devrun/dloopL1.tar.gz dloop_l2=.devrun/dloopL2.tar.gz
