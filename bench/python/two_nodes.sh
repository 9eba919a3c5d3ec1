#!/usr/bin/env bash
# Runs a command as one rank of two emulated nodes of two GPUs each (../shared/MEASURING.md):
# ranks 0-1 are node0 and 2-3 node1, so NCCL uses NVLink inside a node and its socket transport
# between them. Under mpirun: mpirun -n 4 bench/python/two_nodes.sh COMMAND...
rank=${OMPI_COMM_WORLD_RANK:-${RANK:?run under mpirun or torchrun}}
export NCCL_HOSTID=node$((rank / 2)) NCCL_IB_DISABLE=1 NCCL_SOCKET_IFNAME=lo
exec "$@"
