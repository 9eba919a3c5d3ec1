// Inputs of the benchmark. Synthetic data is generated once at the largest size and each smaller
// size of the sweep is a prefix of it: the same seed gives the same elements whatever the sweep.
#include "data.h"

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <numbers>
#include <random>

#include "error.h"

namespace perf {
namespace {

namespace fs = std::filesystem;

struct Format {
  int expBits, manBits;
};

Format formatOf(cclzDataType_t dtype) {
  switch (dtype) {
    case cclzBfloat16:
      return {8, 7};
    case cclzFloat16:
      return {5, 10};
    case cclzFloat32:
      return {8, 23};
    default:
      fail("unsupported dtype {}", static_cast<int>(dtype));
  }
}

// NOTE: element bytes are written and read with memcpy in host order; every machine cclz targets
// is little-endian, as the files and the frame format are.
void storeBits(uint8_t* p, uint32_t bits, size_t size) {
  if (size == 2) {
    const auto h = static_cast<uint16_t>(bits);
    std::memcpy(p, &h, 2);
  } else {
    std::memcpy(p, &bits, 4);
  }
}

// Box-Muller on mt19937_64, whose output the C++ standard fixes (std::normal_distribution's is
// not), so a seed means the same data with any standard library.
void fillGaussian(std::vector<uint8_t>& out, cclzDataType_t dtype, uint64_t seed) {
  const Format f = formatOf(dtype);
  const size_t size = dtypeSize(dtype), count = out.size() / size;
  std::mt19937_64 rng(seed);
  const double scale = 0x1p-53;
  for (size_t i = 0; i < count; i += 2) {
    const double u1 = (static_cast<double>(rng() >> 11) + 1.0) * scale;  // (0, 1]: log is finite
    const double u2 = static_cast<double>(rng() >> 11) * scale;
    const double r = std::sqrt(-2.0 * std::log(u1)), a = 2.0 * std::numbers::pi * u2;
    storeBits(&out[i * size], roundToFormat(r * std::cos(a), f.expBits, f.manBits), size);
    if (i + 1 < count)
      storeBits(&out[(i + 1) * size], roundToFormat(r * std::sin(a), f.expBits, f.manBits), size);
  }
}

void fillUniformBits(std::vector<uint8_t>& out, uint64_t seed) {
  std::mt19937_64 rng(seed);
  for (size_t i = 0; i < out.size(); i += 8) {
    const uint64_t v = rng();
    std::memcpy(&out[i], &v, std::min<size_t>(8, out.size() - i));
  }
}

Dataset synthetic(const Options& opt) {
  const size_t size = dtypeSize(opt.dtype);
  if (opt.maxBytes < size)
    fail("-e/--maxbytes ({}) is smaller than one {} element", opt.maxBytes, dtypeName(opt.dtype));
  Dataset d;
  auto& data = d.storage.emplace_back(opt.maxBytes - opt.maxBytes % size);
  if (opt.data == DataKind::Gaussian) {
    fillGaussian(data, opt.dtype, opt.seed);
    d.description = fmt::format("gaussian N(0,1) rounded to {} (nearest even), seed {}",
                                dtypeName(opt.dtype), opt.seed);
  } else {
    fillUniformBits(data, opt.seed);
    d.description = fmt::format("uniformly random bits, seed {}", opt.seed);
  }
  // nccl-tests' sweep: min, min*f, min*f^2, ... up to max, each rounded down to whole elements.
  for (size_t bytes = opt.minBytes; bytes <= opt.maxBytes;) {
    const size_t whole = bytes - bytes % size;
    if (whole > 0) d.inputs.push_back({"", std::span<const uint8_t>(data.data(), whole)});
    if (opt.minBytes == opt.maxBytes || bytes > opt.maxBytes / opt.stepFactor) break;
    bytes *= opt.stepFactor;
  }
  if (d.inputs.empty())
    fail("-b/--minbytes ({}) is smaller than one {} element", opt.minBytes, dtypeName(opt.dtype));
  return d;
}

std::vector<uint8_t> readFile(const fs::path& path, uint64_t offset, uint64_t bytes) {
  std::ifstream file(path, std::ios::binary);
  if (!file) fail("cannot open {}", path.string());
  file.seekg(static_cast<std::streamoff>(offset));
  std::vector<uint8_t> out(bytes);
  file.read(reinterpret_cast<char*>(out.data()), static_cast<std::streamsize>(bytes));
  if (!file || static_cast<uint64_t>(file.gcount()) != bytes)
    fail("{}: cannot read {} bytes at offset {}", path.string(), bytes, offset);
  return out;
}

uint64_t fileSize(const fs::path& path) {
  std::error_code ec;
  const uint64_t size = fs::file_size(path, ec);
  if (ec) fail("{}: {}", path.string(), ec.message());
  return size;
}

Dataset rawFile(const Options& opt) {
  const fs::path path(opt.input);
  const uint64_t bytes = fileSize(path);
  const size_t size = dtypeSize(opt.dtype);
  if (bytes == 0 || bytes % size != 0)
    fail("{}: {} bytes is not a whole, non-zero number of {} elements ({} bytes each)", opt.input,
         bytes, dtypeName(opt.dtype), size);
  Dataset d;
  d.named = true;
  d.storage.push_back(readFile(path, 0, bytes));
  d.inputs.push_back({path.filename().string(), d.storage.back()});
  d.description = fmt::format("raw file {} read as {}", opt.input, dtypeName(opt.dtype));
  return d;
}

// The index's tensors are stored as bf16; -d fp32 widens them exactly (bf16 is the top half of
// an fp32). Any other change of dtype would round, so it is refused.
std::vector<uint8_t> widenBf16ToFp32(const std::vector<uint8_t>& in) {
  std::vector<uint8_t> out(in.size() * 2);
  for (size_t i = 0; i < in.size() / 2; ++i) {
    uint16_t h;
    std::memcpy(&h, &in[2 * i], 2);
    const uint32_t w = static_cast<uint32_t>(h) << 16;
    std::memcpy(&out[4 * i], &w, 4);
  }
  return out;
}

Dataset indexFile(const Options& opt) {
  const fs::path indexPath(opt.input);
  std::ifstream file(indexPath);
  if (!file) fail("cannot open {}", opt.input);
  nlohmann::json index;
  try {
    index = nlohmann::json::parse(file);
  } catch (const nlohmann::json::exception& e) {
    fail("{}: not valid JSON: {}", opt.input, e.what());
  }
  if (!index.contains("tensors") || !index["tensors"].is_array() || index["tensors"].empty())
    fail("{}: no \"tensors\" array", opt.input);

  Dataset d;
  d.named = true;
  bool widened = false;
  for (const auto& t : index["tensors"]) {
    std::string name, fileName, dtypeText;
    uint64_t offset = 0, nbytes = 0;
    try {
      name = t.at("name").get<std::string>();
      fileName = t.at("file").get<std::string>();
      offset = t.at("offset").get<uint64_t>();
      nbytes = t.at("nbytes").get<uint64_t>();
      dtypeText = t.at("dtype").get<std::string>();
    } catch (const nlohmann::json::exception& e) {
      fail("{}: an entry of \"tensors\" lacks a field: {}", opt.input, e.what());
    }
    cclzDataType_t stored;
    try {
      stored = parseDtype(dtypeText);
    } catch (const Error& e) {
      fail("{}: tensor {}: {}", opt.input, name, e.what());
    }
    const bool widen = stored == cclzBfloat16 && opt.dtype == cclzFloat32;
    if (stored != opt.dtype && !widen)
      fail("{}: tensor {} is {}; it can be run as {} (or widened exactly to fp32), not as {}",
           opt.input, name, dtypeText, dtypeText, dtypeName(opt.dtype));
    const size_t size = dtypeSize(stored);
    if (nbytes == 0 || nbytes % size != 0)
      fail("{}: tensor {}: nbytes {} is not a whole, non-zero number of {} elements", opt.input,
           name, nbytes, dtypeText);
    if (t.contains("shape")) {
      uint64_t elems = 1;
      for (const auto& dim : t["shape"]) elems *= dim.get<uint64_t>();
      if (elems * size != nbytes)
        fail("{}: tensor {}: shape {} does not match nbytes {}", opt.input, name, t["shape"].dump(),
             nbytes);
    }
    const fs::path path = indexPath.parent_path() / fileName;
    if (!fs::is_regular_file(path))
      fail("{}: tensor {}: file {} does not exist", opt.input, name, path.string());
    if (offset + nbytes > fileSize(path))
      fail("{}: tensor {}: bytes [{}, {}) lie outside {}", opt.input, name, offset, offset + nbytes,
           path.string());
    auto bytes = readFile(path, offset, nbytes);
    d.storage.push_back(widen ? widenBf16ToFp32(bytes) : std::move(bytes));
    d.inputs.push_back({name, d.storage.back()});
    widened = widened || widen;
  }
  d.description = fmt::format("{} tensors of {}{}", d.inputs.size(), opt.input,
                              widened ? ", bf16 widened exactly to fp32 (shifted left 16)" : "");
  return d;
}

}  // namespace

cclzDataType_t parseDtype(const std::string& name) {
  if (name == "bf16") return cclzBfloat16;
  if (name == "fp16") return cclzFloat16;
  if (name == "fp32") return cclzFloat32;
  fail("unknown dtype \"{}\" (expected bf16, fp16 or fp32)", name);
}

const char* dtypeName(cclzDataType_t dtype) {
  switch (dtype) {
    case cclzBfloat16:
      return "bf16";
    case cclzFloat16:
      return "fp16";
    case cclzFloat32:
      return "fp32";
    default:
      return "unknown";
  }
}

size_t dtypeSize(cclzDataType_t dtype) { return dtype == cclzFloat32 ? 4 : 2; }

uint32_t roundToFormat(double x, int expBits, int manBits) {
  const uint32_t sign = std::signbit(x) ? 1u << (expBits + manBits) : 0;
  const uint32_t infBits = ((1u << expBits) - 1) << manBits;
  if (std::isnan(x)) return sign | infBits | (1u << (manBits - 1));
  const double a = std::fabs(x);
  if (a == 0) return sign;
  const int bias = (1 << (expBits - 1)) - 1;
  int e;
  std::frexp(a, &e);  // a = m * 2^e, m in [0.5, 1): the leading bit is 2^(e-1)
  // Subnormals share the quantum of the smallest normal binade.
  const int lead = std::max(e - 1, 1 - bias);
  const double q = std::nearbyint(std::ldexp(a, manBits - lead));  // ties to even (default mode)
  // The encoding is monotonic, so one sum covers every case: q >= 2^manBits carries into the
  // exponent field; for subnormals and the smallest binade (lead + bias == 1) the sum is q; a carry
  // past the largest binade reaches the infinity pattern, and larger values are clamped to it.
  const uint64_t bits = (static_cast<uint64_t>(lead + bias) << manBits) + static_cast<uint64_t>(q) -
                        (1ull << manBits);
  return sign | static_cast<uint32_t>(std::min<uint64_t>(bits, infBits));
}

double elementValue(cclzDataType_t dtype, const uint8_t* p) {
  if (dtype == cclzFloat32) {
    float f;
    std::memcpy(&f, p, 4);
    return f;
  }
  uint16_t h;
  std::memcpy(&h, p, 2);
  if (dtype == cclzBfloat16) {
    const uint32_t w = static_cast<uint32_t>(h) << 16;
    float f;
    std::memcpy(&f, &w, 4);
    return f;
  }
  const int exponent = (h >> 10) & 0x1f, mantissa = h & 0x3ff;
  const double sign = (h & 0x8000) ? -1.0 : 1.0;
  if (exponent == 0x1f) return mantissa ? std::nan("") : sign * INFINITY;
  if (exponent == 0) return sign * std::ldexp(mantissa, -24);
  return sign * std::ldexp(mantissa + 1024, exponent - 25);
}

Dataset loadDataset(const Options& opt) {
  if (opt.input.empty()) return synthetic(opt);
  if (!fs::exists(opt.input)) fail("--input {}: no such file", opt.input);
  if (fs::path(opt.input).extension() == ".json") return indexFile(opt);
  return rawFile(opt);
}

}  // namespace perf
