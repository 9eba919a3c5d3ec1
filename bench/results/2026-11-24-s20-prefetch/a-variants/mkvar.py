# Applies one of the session-20 prefetch variants to the tree in the current directory.
import sys
which=sys.argv[1]
def sub(path, old, new):
    s=open(path).read(); assert old in s, (path, old[:60]); open(path,'w').write(s.replace(old,new,1))
D='src/codec/lossless/decode_v2_kernel.cu'
E='src/codec/lossless/encode_v2_kernel.cu'
anchor='''    const uint32_t n =
        static_cast<uint32_t>(min(static_cast<uint64_t>(chunkElems), a.count - first));
    uint64_t begin, end;'''
if which in ('dthis',):
    sub(D, anchor, anchor.replace('    uint64_t begin, end;','''    if (!kStaged && lane == 0) {  // the chunk's raw planes, read a group ahead below
      lossless::device::prefetchL2(planeAll + first, static_cast<uint32_t>(alignUp(n, 16)));
      if constexpr (E::kHasPlaneB)
        lossless::device::prefetchL2(planeBAll + first, static_cast<uint32_t>(alignUp(2 * n, 16)));
    }
    uint64_t begin, end;'''))
if which in ('dnext',):
    sub(D, anchor, anchor.replace('    uint64_t begin, end;','''    if (!kStaged && lane == 0 && k + warps < a.layout.numChunks) {  // the warp's next chunk
      const uint64_t nextFirst = first + warps * chunkElems;
      const uint32_t nextN =
          static_cast<uint32_t>(min(static_cast<uint64_t>(chunkElems), a.count - nextFirst));
      lossless::device::prefetchL2(planeAll + nextFirst, static_cast<uint32_t>(alignUp(nextN, 16)));
      if constexpr (E::kHasPlaneB)
        lossless::device::prefetchL2(planeBAll + nextFirst,
                                     static_cast<uint32_t>(alignUp(2 * nextN, 16)));
    }
    uint64_t begin, end;'''))
if which == 'lb8':
    sub(D, '__launch_bounds__(kThreads, 9) decodeGeneralWindowKernel', '__launch_bounds__(kThreads, 8) decodeGeneralWindowKernel')
if which == 'ethis':
    # the general encoder: its own chunk's input to L2 as it is taken (batches 2-4 then hit L2)
    sub(E, '''      if (lane == 0) taken = atomicAdd(a.workCounter, 1u);
      k = __shfl_sync(kFullMask, taken, 0);
    }''', '''      if (lane == 0) {
        taken = atomicAdd(a.workCounter, 1u);
        if (taken < a.layout.numChunks && a.srcAligned16) {
          const uint64_t from = uint64_t{taken} * a.chunkElems;
          const uint64_t elems = min(static_cast<uint64_t>(a.chunkElems), a.count - from);
          const uint64_t bytes = elems * sizeof(typename Elements<D>::Word);
          if (bytes % 16 == 0)
            lossless::device::prefetchL2(static_cast<const uint8_t*>(a.src) + from * sizeof(typename Elements<D>::Word),
                                         static_cast<uint32_t>(bytes));
        }
      }
      k = __shfl_sync(kFullMask, taken, 0);
    }''')
if which == 'enext':
    sub(E, '''  while (true) {
    // Chunks are taken in order, so a warp only ever waits for chunks already being encoded.
    uint64_t k;
    if constexpr (kStaged) {
      k = next;
    } else {
      uint32_t taken = 0;
      if (lane == 0) taken = atomicAdd(a.workCounter, 1u);
      k = __shfl_sync(kFullMask, taken, 0);
    }''', '''  // The general kernel takes its next chunk as it starts one and asks L2 for its input.
  auto takeAndPrefetch = [&]() -> uint64_t {
    uint32_t taken = 0;
    if (lane == 0) {
      taken = atomicAdd(a.workCounter, 1u);
      if (taken < a.layout.numChunks && a.srcAligned16) {
        using Word = typename Elements<D>::Word;
        const uint64_t from = uint64_t{taken} * a.chunkElems;
        const uint64_t bytes = min(static_cast<uint64_t>(a.chunkElems), a.count - from) * sizeof(Word);
        if (bytes % 16 == 0)
          lossless::device::prefetchL2(static_cast<const uint8_t*>(a.src) + from * sizeof(Word),
                                       static_cast<uint32_t>(bytes));
      }
    }
    return __shfl_sync(kFullMask, taken, 0);
  };
  if constexpr (!kStaged) next = takeAndPrefetch();
  while (true) {
    // Chunks are taken in order, so a warp only ever waits for chunks already being encoded.
    uint64_t k = next;
    if constexpr (!kStaged)
      if (k < a.layout.numChunks) next = takeAndPrefetch();''')
def loop(level):
    W='src/codec/lossless/decode_v2_window.cuh'
    sub(W, '''        na[u] = __ldg(a2 + kLanes * j);
        if constexpr (kHasPlaneB) nb[u] = __ldg(b4 + kLanes * j);
      }''', '''        na[u] = __ldg(a2 + kLanes * j);
        if constexpr (kHasPlaneB) nb[u] = __ldg(b4 + kLanes * j);
        // Two iterations further: asked of the cache now, so the load above finds it there.
        const int far = min(j0 + 3 * kUnroll + u, kGroups - 1);
        asm volatile("prefetch.global.%1 [%0];" ::"l"(a2 + kLanes * far), "n"(0));
      }'''.replace('"prefetch.global.%1 [%0];" ::"l"(a2 + kLanes * far), "n"(0)', '"prefetch.global.'+level+' [%0];" ::"l"(a2 + kLanes * far)'))
if which == 'dloopL1': loop('L1')
if which == 'dloopL2': loop('L2')
