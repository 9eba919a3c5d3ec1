# One GPU: bench/probes/hostpath.cu on this tree, three runs (hostpath-after.txt).
#   bash bench/results/call-cost-one-rank-h200/hostpath.sh   # the device tool, carry .deps
set -u
O=$OUT
CCLZ_BUILD_TARGETS="cclz_core" OUT=$O/b bash scripts/dev/device.sh build > $O/build.out 2>&1
echo "build exit $?"
tn=$(python3 -c "import nvidia.nccl; print(list(nvidia.nccl.__path__)[0])" 2>/dev/null)/lib
export LD_LIBRARY_PATH="$tn${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
lib=$(grep CCLZ_NCCL_LIBRARY build-device/CMakeCache.txt | cut -d= -f2)
mpi=$(mpicxx --showme:link 2>/dev/null | sed 's/-pthread//;s/-Wl,/-Xlinker /g')
defs=$(grep -o "\-DCCLZ_HAVE_[A-Z]*" build-device/build.ninja | sort -u | tr "\n" " ")
nvcc -O3 -g -std=c++20 -gencode arch=compute_90a,code=sm_90a $defs -I include -I src \
  bench/probes/hostpath.cu build-device/src/libcclz_core.a -lcublasLt $mpi \
  -L$(dirname $lib) -l:libnccl.so.2 -Xlinker -rpath=$(dirname $lib) -o /tmp/hp 2>&1 | grep -v warning
for i in 1 2 3; do echo "== run $i"; /tmp/hp; done 2>&1 | tee $O/hostpath-after.txt
