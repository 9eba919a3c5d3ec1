# One GPU: cclz's host path per call against NCCL's own call, the tree before a change (a
# `git archive` tarball) beside this one, both against torch's NCCL (device.sh's default).
#   git archive -o .devrun/old.tar <commit before>
#   bash bench/results/call-cost-one-rank-h200/hostpath-ab.sh .devrun/old.tar   # the device tool, carry .deps
# HOSTPATH_RANKS=N: the probe on N ranks, one GPU each (default 1). The old tree's
# tests/collective/forwarding_transport.h must forward controlMesh() (for the probe's `path`
# rows).
set -u
O=$OUT old_tar=$(realpath "$1")
mkdir -p /tmp/old && tar -xf "$old_tar" -C /tmp/old
( cmake -S /tmp/old -B /tmp/old/build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCCLZ_CUDA_ARCHS=90a \
    -DCCLZ_DEPS_DIR="$PWD/.deps" -DCCLZ_NCCL_FROM_TORCH=ON > $O/old-build.log 2>&1 &&
    ninja -C /tmp/old/build -j7 cclz_core >> $O/old-build.log 2>&1; echo "old build $?" ) &
CCLZ_BUILD_TARGETS="cclz_core nccl_tests" OUT=$O/b bash scripts/dev/device.sh build > $O/build.out 2>&1
echo "new build exit $?"
wait
tn=$(python3 -c "import nvidia.nccl; print(list(nvidia.nccl.__path__)[0])" 2>/dev/null)/lib
export LD_LIBRARY_PATH="$tn${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
lib=$(grep CCLZ_NCCL_LIBRARY build-device/CMakeCache.txt | cut -d= -f2)
mpi=$(mpicxx --showme:link 2>/dev/null | sed 's/-pthread//;s/-Wl,/-Xlinker /g')
mpiinc=$(mpicxx --showme:compile 2>/dev/null | sed 's/-pthread//')
defs=$(grep -o "\-DCCLZ_HAVE_[A-Z]*" build-device/build.ninja | sort -u | tr "\n" " ")
probe() {  # tree build output
  nvcc -O3 -g -std=c++20 -gencode arch=compute_90a,code=sm_90a $defs -I $1/include -I $1/src \
    -I $1/tests/collective $mpiinc bench/probes/hostpath.cu $2/src/libcclz_core.a \
    -lcublasLt $mpi \
    -L$(dirname $lib) -l:libnccl.so.2 -Xlinker -rpath=$(dirname $lib) -o $3 2>&1 | grep -v warning
}
probe /tmp/old /tmp/old/build /tmp/hp_old & probe . build-device /tmp/hp_new & wait
mpirun --allow-run-as-root -n 1 -x LD_LIBRARY_PATH build-device/tests/collective/nccl_tests \
  --gtest_filter='NcclAdaptive*' > $O/adaptive_tests.txt 2>&1
echo "NcclAdaptive on one rank: exit $?"
for i in 1 2 3; do
  for v in old new; do
    echo "== $v run $i"
    mpirun --allow-run-as-root -n "${HOSTPATH_RANKS:-1}" -x LD_LIBRARY_PATH /tmp/hp_$v
  done
done 2>&1 | tee $O/hostpath-ab.txt
