#include "support/tensors.h"

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <stdexcept>

namespace cclz::test {

std::string realTensorDir() {
  namespace fs = std::filesystem;
  std::vector<std::string> candidates;
  if (const char* env = std::getenv("CCLZ_SHARED_DATA"); env && *env) candidates.push_back(env);
#ifdef CCLZ_SHARED_DATA_DIR
  candidates.push_back(CCLZ_SHARED_DATA_DIR);
#endif
  for (const auto& dir : candidates) {
    std::error_code ec;
    if (fs::is_regular_file(fs::path(dir) / "index.json", ec)) return dir;
  }
  return "";
}

std::vector<RealTensor> loadRealTensors(const std::string& dir) {
  namespace fs = std::filesystem;
  std::ifstream indexFile(fs::path(dir) / "index.json");
  if (!indexFile) throw std::runtime_error("cannot open " + dir + "/index.json");
  const nlohmann::json index = nlohmann::json::parse(indexFile);
  std::vector<RealTensor> tensors;
  for (const auto& entry : index.at("tensors")) {
    if (entry.at("dtype").get<std::string>() != "bf16")
      throw std::runtime_error("unexpected dtype in index.json");
    RealTensor t;
    t.name = entry.at("name").get<std::string>();
    const auto offset = entry.at("offset").get<uint64_t>();
    const auto nbytes = entry.at("nbytes").get<uint64_t>();
    uint64_t elements = 1;
    for (const auto& d : entry.at("shape")) elements *= d.get<uint64_t>();
    t.cols = entry.at("shape").back().get<uint64_t>();
    if (nbytes != 2 * elements) throw std::runtime_error(t.name + ": nbytes does not match shape");
    std::ifstream file(fs::path(dir) / entry.at("file").get<std::string>(), std::ios::binary);
    file.seekg(static_cast<std::streamoff>(offset));
    t.values.resize(elements);
    file.read(reinterpret_cast<char*>(t.values.data()), static_cast<std::streamsize>(nbytes));
    if (!file || static_cast<uint64_t>(file.gcount()) != nbytes)
      throw std::runtime_error(t.name + ": short read");
    tensors.push_back(std::move(t));
  }
  return tensors;
}

double exponentEntropy(const std::vector<uint16_t>& values) {
  if (values.empty()) return 0.0;
  uint64_t histogram[256] = {};
  for (uint16_t v : values) ++histogram[(v >> 7) & 0xFF];
  double h = 0.0;
  for (uint64_t c : histogram) {
    if (!c) continue;
    const double p = static_cast<double>(c) / static_cast<double>(values.size());
    h -= p * std::log2(p);
  }
  return h;
}

std::vector<uint8_t> bf16Bytes(const RealTensor& t) {
  std::vector<uint8_t> bytes(2 * t.values.size());
  if (!bytes.empty()) std::memcpy(bytes.data(), t.values.data(), bytes.size());
  return bytes;
}

}  // namespace cclz::test
