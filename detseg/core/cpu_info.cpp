#include "detseg/core/cpu_info.h"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <fstream>
#include <set>
#include <sstream>
#include <vector>

namespace detseg {

namespace {

// The value of the first "key : value" line of /proc/cpuinfo whose key is `key`.
std::string cpuinfo_field(const std::string& key) {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    const size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::string name = line.substr(0, colon);
    while (!name.empty() && std::isspace(static_cast<unsigned char>(name.back()))) name.pop_back();
    if (name != key) continue;
    std::string value = line.substr(colon + 1);
    const size_t first = value.find_first_not_of(" \t");
    return first == std::string::npos ? "" : value.substr(first);
  }
  return "";
}

const std::set<std::string>& cpu_flags() {
  static const std::set<std::string> flags = [] {
    std::set<std::string> out;
    std::istringstream words(cpuinfo_field("flags"));
    for (std::string w; words >> w;) out.insert(w);
    return out;
  }();
  return flags;
}

bool has(const char* flag) { return cpu_flags().count(flag) > 0; }

std::string upper(std::string s) {
  for (char& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

// oneDNN's ISAs, best first, each with the feature bits it is made of (cpu_isa_traits.hpp: an ISA
// may run when its bits are a subset of ONEDNN_MAX_CPU_ISA's and the CPU has them) and whether this
// CPU supports it. avx2_vnni is not part of avx512_core, so a cap of AVX512_CORE skips it.
struct OneDnnIsa {
  const char* name;
  std::vector<const char*> bits;
  bool supported;
};

std::vector<OneDnnIsa> onednn_isas() {
  const bool sse41 = has("sse4_1"), avx = sse41 && has("avx"), avx2 = avx && has("avx2");
  const bool avx2_vnni = avx2 && has("avx_vnni");
  const bool avx2_vnni_2 = avx2_vnni && has("avx_vnni_int8") && has("avx_ne_convert");
  const bool core = avx2 && has("avx512f") && has("avx512bw") && has("avx512vl") && has("avx512dq");
  const bool core_vnni = core && has("avx512_vnni");
  const bool core_bf16 = core_vnni && has("avx512_bf16");
  const bool avx10 = core_bf16 && has("avx512_fp16");
  const bool amx = avx10 && has("amx_tile") && has("amx_int8") && has("amx_bf16");
  const bool amx_fp16 = amx && has("amx_fp16");
  const std::vector<const char*> b_sse41 = {"sse41"};
  std::vector<const char*> b_avx = b_sse41, b_avx2, b_vnni, b_vnni2, b_core, b_core_vnni, b_bf16, b_avx10, b_amx, b_amx16;
  b_avx.push_back("avx");
  b_avx2 = b_avx, b_avx2.push_back("avx2");
  b_vnni = b_avx2, b_vnni.push_back("avx2_vnni");
  b_vnni2 = b_vnni, b_vnni2.push_back("avx2_vnni_2");
  b_core = b_avx2, b_core.push_back("avx512_core");
  b_core_vnni = b_core, b_core_vnni.push_back("avx512_core_vnni");
  b_bf16 = b_core_vnni, b_bf16.push_back("avx512_core_bf16");
  b_avx10 = b_bf16, b_avx10.push_back("avx10_1_512");
  b_amx = b_avx10, b_amx.push_back("amx");
  b_amx16 = b_amx, b_amx16.push_back("amx_fp16");
  return {{"avx10_1_512_amx_fp16", b_amx16, amx_fp16}, {"avx10_1_512_amx", b_amx, amx},
          {"avx10_1_512", b_avx10, avx10},             {"avx512_core_bf16", b_bf16, core_bf16},
          {"avx512_core_vnni", b_core_vnni, core_vnni}, {"avx512_core", b_core, core},
          {"avx2_vnni_2", b_vnni2, avx2_vnni_2},       {"avx2_vnni", b_vnni, avx2_vnni},
          {"avx2", b_avx2, avx2},                      {"avx", b_avx, avx},
          {"sse41", b_sse41, sse41}};
}

// ONEDNN_MAX_CPU_ISA (or DNNL_MAX_CPU_ISA) as one of onednn_isas()'s names; "" when unset, ALL,
// DEFAULT or not a name oneDNN knows (it then ignores the variable too).
std::string onednn_max_isa_setting(std::string* raw) {
  const char* v = std::getenv("ONEDNN_MAX_CPU_ISA");
  if (v == nullptr || *v == '\0') v = std::getenv("DNNL_MAX_CPU_ISA");
  if (v == nullptr || *v == '\0') return "";
  *raw = v;  // reported as set, even when oneDNN ignores it
  std::string name = upper(v);
  if (name == "AVX512_CORE_FP16") name = "AVX10_1_512";
  if (name == "AVX512_CORE_AMX") name = "AVX10_1_512_AMX";
  if (name == "AVX512_CORE_AMX_FP16") name = "AVX10_1_512_AMX_FP16";
  for (const OneDnnIsa& isa : onednn_isas())
    if (upper(isa.name) == name) return isa.name;
  return "";
}

}  // namespace

std::string cpu_model_name() {
  std::string name = cpuinfo_field("model name");
  return name.empty() ? "unknown CPU" : name;
}

std::string onednn_cpu_isa() {
  std::string raw;
  const std::string cap = onednn_max_isa_setting(&raw);
  const std::vector<OneDnnIsa> isas = onednn_isas();
  std::set<std::string> allowed;  // the cap's bits; empty: no cap
  for (const OneDnnIsa& isa : isas)
    if (isa.name == cap) allowed.insert(isa.bits.begin(), isa.bits.end());
  for (const OneDnnIsa& isa : isas) {
    const bool within = cap.empty() || std::all_of(isa.bits.begin(), isa.bits.end(),
                                                   [&](const char* bit) { return allowed.count(bit) > 0; });
    if (isa.supported && within) return isa.name;
  }
  return "none";
}

std::string aten_native_cpu_capability() {
  // ATen's rule (DispatchStub.cpp): AVX512 needs AVX512 VL, BW, DQ and FMA; AVX2 needs FMA too.
  if (has("avx512vl") && has("avx512bw") && has("avx512dq") && has("fma")) return "AVX512";
  if (has("avx2") && has("fma")) return "AVX2";
  return "DEFAULT";
}

std::string cpu_summary() {
  std::string raw;
  onednn_max_isa_setting(&raw);
  std::string out = cpu_model_name() + ", " + std::to_string(sysconf(_SC_NPROCESSORS_ONLN)) +
                    " logical CPUs; oneDNN ISA " + onednn_cpu_isa();
  if (!raw.empty()) out += " (ONEDNN_MAX_CPU_ISA=" + raw + ")";
  return out;
}

}  // namespace detseg
