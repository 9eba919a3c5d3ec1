#!/usr/bin/env bash
# Runs a command as one rank of two emulated nodes (../shared/MEASURING.md): the first half of
# the ranks is node0, the second node1 (4 ranks: 0-1 and 2-3; 2 ranks: one GPU a node), so NCCL
# uses NVLink inside a node and its socket transport between them.
# Point-to-point messages over the socket take 512 KiB chunks (docs/collectives.md, "Slow
# networks": cclz's reduce-scatter and all-to-all frames move ~25% faster; NCCL's collectives do
# not read it), unless NCCL_P2P_NET_CHUNKSIZE is set already.
# Under mpirun: mpirun -n 4 bench/python/two_nodes.sh COMMAND...
rank=${OMPI_COMM_WORLD_RANK:-${RANK:?run under mpirun or torchrun}}
size=${OMPI_COMM_WORLD_SIZE:-${WORLD_SIZE:?run under mpirun or torchrun}}
[ $((size % 2)) -eq 0 ] || { echo "two_nodes.sh: $size ranks do not split into two nodes" >&2; exit 2; }
export NCCL_HOSTID=node$((rank / (size / 2))) NCCL_IB_DISABLE=1 NCCL_SOCKET_IFNAME=lo
export NCCL_P2P_NET_CHUNKSIZE=${NCCL_P2P_NET_CHUNKSIZE:-524288}
exec "$@"
