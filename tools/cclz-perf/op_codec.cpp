// --op codec: for one input, the encoded size, the encode and decode times (medians), a plain copy
// of the same bytes as the roofline reference, and a check of the round trip: byte for byte for
// lossless codecs; for the lossy ones NMSE and max relative error, with qgrad every element within
// the format's error bound and with fp8 no NaN/Inf appearing or vanishing; for both lossy codecs
// decode-and-accumulate into fp32, and for qgrad the error-feedback encode.
#include <algorithm>
#include <cstring>
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "compare.h"
#include "error.h"
#include "gpu.h"
#include "ops.h"
#include "timing.h"

namespace perf {

// The codec configuration the flags ask for (shared with op_collective.cpp).
cclzCodecConfig_t codecConfig(const Options& opt) {
  cclzCodecConfig_t config = CCLZ_CODEC_CONFIG_INITIALIZER;
  config.codec = opt.codec == "none"    ? cclzCodecNone
                 : opt.codec == "qgrad" ? cclzCodecQgrad
                 : opt.codec == "fp8"   ? cclzCodecFp8
                                        : cclzCodecLossless;
  config.chunkElems = opt.chunkElems;
  config.bits = opt.bits;
  config.blockElems = opt.blockElems;
  config.rounding = opt.stochastic ? cclzRoundStochastic : cclzRoundNearest;
  config.seed = opt.roundingSeed;
  config.fp8Format = opt.fp8Format == "e4m3"   ? cclzFp8E4M3
                     : opt.fp8Format == "e5m2" ? cclzFp8E5M2
                     : opt.fp8Format == "int8" ? cclzFp8Int8
                                               : cclzFp8Default;
  config.fp8RowElems = opt.fp8RowElems;
  config.fp8HadamardSize = opt.fp8Hadamard;
  config.fp8Rotation = opt.fp8Rotation == "never"      ? cclzFp8RotateNever
                       : opt.fp8Rotation == "always"   ? cclzFp8RotateAlways
                       : opt.fp8Rotation == "adaptive" ? cclzFp8RotateAdaptive
                                                       : cclzFp8RotateDefault;
  config.fp8RotateThreshold = opt.fp8Threshold;
  config.fp8ScaleCandidates = opt.fp8Candidates;
  return config;
}

namespace {

// The handle, destroyed on every path out (cclzCodecDestroy waits for its device work).
class Feedback {
 public:
  Feedback(size_t count, cclzMemoryType_t memory) {
    PERF_CCLZ_CHECK(cclzFeedbackCreate(&handle_, count, memory));
  }
  ~Feedback() { (void)cclzFeedbackDestroy(handle_); }
  Feedback(const Feedback&) = delete;
  Feedback& operator=(const Feedback&) = delete;
  cclzFeedback_t get() const { return handle_; }

 private:
  cclzFeedback_t handle_ = nullptr;
};

bool isQgrad(const Options& opt) { return opt.codec == "qgrad"; }
// The defaults of cclz.h, for the bound check.
int qgradBits(const Options& opt) { return opt.bits ? opt.bits : 4; }
int qgradBlock(const Options& opt) { return opt.blockElems ? opt.blockElems : 64; }

class Codec {
 public:
  explicit Codec(const Options& opt) {
    const cclzCodecConfig_t config = codecConfig(opt);
    PERF_CCLZ_CHECK(cclzCodecCreate(&handle_, &config));
  }
  ~Codec() { (void)cclzCodecDestroy(handle_); }
  Codec(const Codec&) = delete;
  Codec& operator=(const Codec&) = delete;
  cclzCodec_t get() const { return handle_; }

 private:
  cclzCodec_t handle_ = nullptr;
};

// A decoded buffer starts as this pattern, so that a decoder that writes nothing cannot pass on
// bytes left over from an earlier, identical input.
constexpr uint8_t kPoison = 0xa5;

Row newRow(const Context& ctx, const Input& in) {
  Row r;
  r.op = "codec";
  r.codec = ctx.opt.codec;
  r.dtype = dtypeName(ctx.opt.dtype);
  r.device = ctx.opt.device == Device::Gpu ? "gpu" : "cpu";
  if (!in.name.empty()) r.tensor = in.name;
  r.bytes = in.bytes.size();
  r.count = in.bytes.size() / dtypeSize(ctx.opt.dtype);
  return r;
}

void setCheck(Row& r, const Options& opt, std::span<const uint8_t> input,
              std::span<const uint8_t> output) {
  const Comparison c = compare(opt.dtype, input, output);
  r.wrong = c.wrong;
  r.nmse = c.nmse;
  r.maxRelErr = c.maxRelErr;
  r.lossy = opt.lossy();
  if (!r.lossy) {
    r.exact = c.wrong == 0;
    return;
  }
  r.brokenClass = classChanges(opt.dtype, input, output);
  if (!isQgrad(opt)) {  // fp8 has no per-element bound: only NaN/Inf must survive as they were
    r.exact = r.brokenClass == 0;
    return;
  }
  r.outOfBound = qgradOutOfBound(opt.dtype, input, output, qgradBits(opt), qgradBlock(opt),
                                 opt.stochastic);
  r.exact = r.outOfBound == 0 && r.brokenClass == 0;
}

Row runHost(const Context& ctx, const Input& in) {
  const Options& opt = ctx.opt;
  Row r = newRow(ctx, in);
  r.baseline = "memcpy";
  Codec codec(opt);
  size_t capacity = 0;
  PERF_CCLZ_CHECK(cclzCodecMaxEncodedSize(codec.get(), r.count, opt.dtype, &capacity));
  std::vector<uint8_t> frame(capacity), out(r.bytes, kPoison);
  size_t encoded = 0;

  if (isQgrad(opt) && opt.feedback) {
    // Each call reads and rewrites the residual, as a training step would.
    Feedback feedback(r.count, cclzMemoryHost);
    r.feedback = true;
    r.encodeUs = timeHost(opt.warmup, opt.iters, [&] {
      PERF_CCLZ_CHECK(cclzEncodeFeedbackHost(codec.get(), feedback.get(), in.bytes.data(),
                                             r.count, opt.dtype, frame.data(), frame.size(),
                                             &encoded));
    });
  } else {
    r.encodeUs = timeHost(opt.warmup, opt.iters, [&] {
      PERF_CCLZ_CHECK(cclzEncodeHost(codec.get(), in.bytes.data(), r.count, opt.dtype,
                                     frame.data(), frame.size(), &encoded));
    });
  }
  // The frame decoded below is the plain encode of the input (with feedback, the last frame
  // carried the residual of earlier calls too).
  PERF_CCLZ_CHECK(cclzEncodeHost(codec.get(), in.bytes.data(), r.count, opt.dtype, frame.data(),
                                 frame.size(), &encoded));
  r.encodedBytes = encoded;
  r.decodeUs = timeHost(opt.warmup, opt.iters, [&] {
    PERF_CCLZ_CHECK(
        cclzDecodeHost(codec.get(), frame.data(), encoded, out.data(), r.count, opt.dtype));
  });
  if (opt.check) setCheck(r, opt, in.bytes, out);
  if (opt.lossy()) {
    std::vector<float> acc(r.count, 0.0f);
    r.accumulateUs = timeHost(opt.warmup, opt.iters, [&] {
      PERF_CCLZ_CHECK(cclzDecodeAccumulateHost(codec.get(), frame.data(), encoded, acc.data(),
                                               r.count, opt.dtype));
    });
  }
  r.copyUs = timeHost(opt.warmup, opt.iters, [&] {
    std::memcpy(out.data(), in.bytes.data(), r.bytes);
    doNotOptimize(out.data());
  });
  return r;
}

#ifdef CCLZ_HAVE_CUDA
size_t roundUp(size_t n, size_t to) { return (n + to - 1) / to * to; }

// NOTE: a small message would otherwise be timed from L2 (50 MB on an H200), not HBM. Each
// iteration therefore works on its own copy of the input, frame and output (a "buffer set"), as
// many as make 200 MB (4x L2) or one per iteration, whichever is fewer, within 20 GB; and the L2
// is flushed before each timed loop. So no timed iteration finds its data in L2, whatever S is.
size_t bufferSets(size_t messageBytes, size_t setBytes, int iterations) {
  constexpr size_t kRotateBytes = 200'000'000, kMaxBytes = 20'000'000'000;
  size_t sets = (kRotateBytes + messageBytes - 1) / messageBytes;
  sets = std::min(sets, static_cast<size_t>(iterations));
  sets = std::min(sets, kMaxBytes / setBytes);
  return std::max<size_t>(sets, 1);
}

Row runDevice(const Context& ctx, const Input& in) {
  const Options& opt = ctx.opt;
  Row r = newRow(ctx, in);
  r.baseline = "cudaMemcpy D2D";
  r.gpuName = ctx.gpuName;
  gpu::Stream stream;  // declared first, destroyed last: the codec and buffers go before it
  const cudaStream_t s = stream.get();
  auto* cs = reinterpret_cast<cclzStream_t>(s);
  Codec codec(opt);
  size_t capacity = 0;
  PERF_CCLZ_CHECK(cclzCodecMaxEncodedSize(codec.get(), r.count, opt.dtype, &capacity));

  // Buffer sets are laid out at 256-byte pitches in three slabs (inputs, frames, outputs).
  const size_t inPitch = roundUp(r.bytes, 256), framePitch = roundUp(capacity, 256);
  const size_t sets = bufferSets(r.bytes, 2 * inPitch + framePitch, opt.warmup + opt.iters);
  r.bufferSets = static_cast<int>(sets);
  gpu::Buffer inputs(sets * inPitch), frames(sets * framePitch), outputs(sets * inPitch);
  gpu::L2Flusher flusher;
  const auto input = [&](int i) { return inputs.data() + i % sets * inPitch; };
  const auto frame = [&](int i) { return frames.data() + i % sets * framePitch; };
  const auto output = [&](int i) { return outputs.data() + i % sets * inPitch; };

  // Fill every set with the input by doubling: log2(sets) copies instead of sets copies.
  PERF_CUDA_CHECK(
      cudaMemcpyAsync(inputs.data(), in.bytes.data(), r.bytes, cudaMemcpyHostToDevice, s));
  for (size_t have = 1; have < sets; have *= 2)
    PERF_CUDA_CHECK(cudaMemcpyAsync(inputs.data() + have * inPitch, inputs.data(),
                                    std::min(have, sets - have) * inPitch, cudaMemcpyDeviceToDevice,
                                    s));

  // --batch: calls queued back to back (gpu.h); by default each call is timed alone.
  const auto timeCalls = [&](const std::function<void(int)>& fn) {
    return opt.batch ? gpu::timeBatchOnStream(s, opt.warmup, opt.iters, fn)
                     : gpu::timeOnStream(s, opt.warmup, opt.iters, fn);
  };
  flusher.flush(s);
  if (isQgrad(opt) && opt.feedback) {
    // One residual per buffer set, so that the residual is not found in L2 either.
    std::vector<std::unique_ptr<Feedback>> feedback;
    for (size_t k = 0; k < sets; ++k)
      feedback.push_back(std::make_unique<Feedback>(r.count, cclzMemoryDevice));
    r.feedback = true;
    flusher.flush(s);
    r.encodeUs = timeCalls([&](int i) {
      PERF_CCLZ_CHECK(cclzEncodeFeedback(codec.get(), feedback[i % sets]->get(), input(i),
                                         r.count, opt.dtype, frame(i), framePitch, nullptr, cs));
    });
    PERF_CCLZ_CHECK(cclzCodecSynchronize(codec.get(), nullptr));
    // The frames decoded below are plain encodes of the input (with feedback, the last frames
    // carried the residual of earlier calls too).
    for (size_t k = 0; k < sets; ++k)
      PERF_CCLZ_CHECK(cclzEncode(codec.get(), input(static_cast<int>(k)), r.count, opt.dtype,
                                 frame(static_cast<int>(k)), framePitch, nullptr, cs));
  } else {
    r.encodeUs = timeCalls([&](int i) {
      PERF_CCLZ_CHECK(cclzEncode(codec.get(), input(i), r.count, opt.dtype, frame(i), framePitch,
                                 nullptr, cs));
    });
  }
  size_t encoded = 0;
  PERF_CCLZ_CHECK(cclzCodecSynchronize(codec.get(), &encoded));
  r.encodedBytes = encoded;

  // Every set holds the same input, so every frame has the size of the last one.
  PERF_CUDA_CHECK(cudaMemsetAsync(outputs.data(), kPoison, outputs.size(), s));
  flusher.flush(s);
  r.decodeUs = timeCalls([&](int i) {
    PERF_CCLZ_CHECK(cclzDecode(codec.get(), frame(i), encoded, output(i), r.count, opt.dtype, cs));
  });
  PERF_CCLZ_CHECK(cclzCodecSynchronize(codec.get(), nullptr));  // reports a rejected frame

  // Every set was decoded (sets <= iterations); the worst one is reported.
  if (opt.check) {
    std::vector<uint8_t> host(r.bytes);
    Row worst = r;
    for (size_t k = 0; k < sets; ++k) {
      PERF_CUDA_CHECK(cudaMemcpyAsync(host.data(), output(static_cast<int>(k)), r.bytes,
                                      cudaMemcpyDeviceToHost, s));
      PERF_CUDA_CHECK(cudaStreamSynchronize(s));
      Row c = r;
      setCheck(c, opt, in.bytes, host);
      if (k == 0 || c.outOfBound > worst.outOfBound || c.brokenClass > worst.brokenClass ||
          c.wrong > worst.wrong)
        worst = c;
    }
    r = worst;
  }

  if (opt.lossy()) {  // decode-and-accumulate into one fp32 buffer per set
    const size_t accPitch = roundUp(r.count * sizeof(float), 256);
    gpu::Buffer accs(sets * accPitch);
    PERF_CUDA_CHECK(cudaMemsetAsync(accs.data(), 0, accs.size(), s));
    flusher.flush(s);
    r.accumulateUs = timeCalls([&](int i) {
      PERF_CCLZ_CHECK(cclzDecodeAccumulate(codec.get(), frame(i), encoded,
                                           reinterpret_cast<float*>(accs.data() + i % sets * accPitch),
                                           r.count, opt.dtype, cs));
    });
    PERF_CCLZ_CHECK(cclzCodecSynchronize(codec.get(), nullptr));
  }

  flusher.flush(s);
  r.copyUs = timeCalls([&](int i) {
    PERF_CUDA_CHECK(cudaMemcpyAsync(output(i), input(i), r.bytes, cudaMemcpyDeviceToDevice, s));
  });
  return r;
}
#endif

}  // namespace

// The library judges the configuration (chunk, streams, code length) when a handle is made.
void validateCodec(const Options& opt) { Codec check(opt); }

Row runCodec(const Context& ctx, const Input& in) {
#ifdef CCLZ_HAVE_CUDA
  if (ctx.opt.device == Device::Gpu) return runDevice(ctx, in);
#endif
  return runHost(ctx, in);
}

}  // namespace perf
