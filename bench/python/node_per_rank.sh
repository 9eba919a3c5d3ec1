#!/usr/bin/env bash
# Runs a command as one rank that is its own emulated node (../shared/MEASURING.md, NCCL_HOSTID):
# NCCL then moves every byte between every pair of ranks over its socket transport on loopback,
# and ranks may share a GPU (NCCL refuses two ranks of one host on one GPU, not of two hosts).
# The stand-in for a slow network on a machine with fewer GPUs than ranks: run the ranks under
# MPS (nvidia-cuda-mps-control -d), or the GPU time-slices between their processes and NCCL's
# kernels, which wait for the socket, hold it in turn (4 ranks on one H200, all-gathers of 64 MiB:
# NCCL's 4.6x and cclz's fp8 8.5x slower).
# Point-to-point messages take 512 KiB chunks as in two_nodes.sh, unless NCCL_P2P_NET_CHUNKSIZE
# is set already.
# Under mpirun: mpirun -n 4 bench/python/node_per_rank.sh COMMAND...
rank=${OMPI_COMM_WORLD_RANK:-${RANK:?run under mpirun or torchrun}}
export NCCL_HOSTID=rank$rank NCCL_IB_DISABLE=1 NCCL_SOCKET_IFNAME=lo
export NCCL_P2P_NET_CHUNKSIZE=${NCCL_P2P_NET_CHUNKSIZE:-524288}
exec "$@"
