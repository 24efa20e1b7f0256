#include "detseg/dist/process_group.h"

// ProcessGroupGloo.hpp is guarded by the macro torch's own build defines; the <gloo/...> headers
// it includes come from gloo_shim/ (see the note there).
#ifndef USE_C10D_GLOO
#define USE_C10D_GLOO
#endif
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#ifndef DETSEG_WITH_NCCL
#define DETSEG_WITH_NCCL 0  // CMake defines it to 1 where it found the nccl.h LibTorch was built with
#endif
#if DETSEG_WITH_NCCL
#ifndef USE_C10D_NCCL
#define USE_C10D_NCCL
#endif
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#endif

#include <cstdlib>
#include <cstring>

#include "detseg/core/error.h"
#include "detseg/core/log.h"

namespace detseg::dist {
namespace {

// The message of a c10d/Gloo failure without LibTorch's C++ backtrace.
std::string short_what(const std::exception& e) {
  if (auto* c10 = dynamic_cast<const c10::Error*>(&e)) return c10->what_without_backtrace();
  return e.what();
}

bool get_int(const char* name, int& out) {
  const char* value = std::getenv(name);
  if (value == nullptr || *value == '\0') return false;
  char* end = nullptr;
  long v = std::strtol(value, &end, 10);
  DETSEG_CONFIG_CHECK(end != nullptr && *end == '\0', "environment variable ", name, "=\"", value,
                      "\": expected an integer");
  out = static_cast<int>(v);
  return true;
}

constexpr bool kBuiltWithNccl = DETSEG_WITH_NCCL != 0;

bool is_loopback(const std::string& addr) {
  return addr == "localhost" || addr.rfind("127.", 0) == 0 || addr == "::1";
}

}  // namespace

Environment environment_from_env() {
  Environment env;
  if (!get_int("WORLD_SIZE", env.world_size)) return env;
  DETSEG_CONFIG_CHECK(env.world_size >= 1, "environment variable WORLD_SIZE=", env.world_size, ": must be >= 1");
  DETSEG_CONFIG_CHECK(get_int("RANK", env.rank) || env.world_size == 1,
                      "environment variable RANK is not set but WORLD_SIZE=", env.world_size, " is");
  DETSEG_CONFIG_CHECK(env.rank >= 0 && env.rank < env.world_size, "environment variable RANK=", env.rank,
                      ": must be in [0, WORLD_SIZE=", env.world_size, ")");
  get_int("LOCAL_RANK", env.local_rank);
  if (const char* addr = std::getenv("MASTER_ADDR"); addr != nullptr && *addr != '\0') env.master_addr = addr;
  get_int("MASTER_PORT", env.master_port);
  DETSEG_CONFIG_CHECK(env.master_port > 0 && env.master_port < 65536, "environment variable MASTER_PORT=",
                      env.master_port, ": must be in 1..65535");
  get_int("TORCHELASTIC_RESTART_COUNT", env.restart_count);
  DETSEG_CONFIG_CHECK(env.restart_count >= 0, "environment variable TORCHELASTIC_RESTART_COUNT=", env.restart_count,
                      ": must be >= 0");
  const char* agent = std::getenv("TORCHELASTIC_USE_AGENT_STORE");
  env.agent_store = agent != nullptr && std::string(agent) == "True";  // torch's own test of it
  return env;
}

bool use_nccl(const std::string& backend, const at::Device& device) {
  if (backend == "gloo") return false;
  if (backend == "nccl") {
    DETSEG_CONFIG_CHECK(device.is_cuda(), "train.distributed.backend: nccl runs on CUDA devices; this run trains on ",
                        device.str(), " (use gloo or auto)");
    DETSEG_CONFIG_CHECK(kBuiltWithNccl, "train.distributed.backend: nccl: this detseg was built without NCCL "
                        "(nccl.h was not found at configure time); use gloo or auto");
    return true;
  }
  return device.is_cuda() && kBuiltWithNccl;
}

struct ProcessGroup::Impl {
  c10::intrusive_ptr<c10d::Store> store;
  c10::intrusive_ptr<c10d::Backend> gloo;  // every CPU tensor (control messages), and CUDA ones without NCCL
  c10::intrusive_ptr<c10d::Backend> nccl;  // CUDA tensors, when the run asked for it
  // The backend a collective on `t` goes through.
  bool on_nccl(const at::Tensor& t) const { return t.is_cuda() && nccl; }
  c10d::Backend& for_tensor(const at::Tensor& t) { return on_nccl(t) ? *nccl : *gloo; }
};

ProcessGroup::ProcessGroup(const Environment& env, std::chrono::milliseconds timeout, bool with_nccl)
    : env_(env), timeout_(timeout), impl_(std::make_unique<Impl>()) {
  const std::string where = str("distributed: rank ", env.rank, " of ", env.world_size);
  try {
    c10d::TCPStoreOptions store_options;
    store_options.port = static_cast<uint16_t>(env.master_port);
    // Under torchrun the agent hosts the store: rank 0 binding the port as well only printed
    // c10d's "failed to bind" line. The agent's store outlives a restart, and with it the worker
    // count, so only a store of our own waits for the workers.
    store_options.isServer = env.rank == 0 && !env.agent_store;
    store_options.numWorkers = static_cast<size_t>(env.world_size);
    store_options.waitWorkers = !env.agent_store;
    store_options.timeout = timeout;
    c10::intrusive_ptr<c10d::Store> tcp = c10::make_intrusive<c10d::TCPStore>(env.master_addr, store_options);
    // torchrun keeps its store across restarts. Gloo's rendezvous waits for each peer's key and
    // reads it, so a restarted worker found the dead workers' addresses and failed to connect
    // (connection refused) unless the peer had written its new key first. The prefix is the one
    // PyTorch's env:// rendezvous put over the agent's store.
    impl_->store = c10::make_intrusive<c10d::PrefixStore>(str("/worker/attempt_", env.restart_count), tcp);
  } catch (const std::exception& e) {
    throw Error(str(where, ": rendezvous at MASTER_ADDR:MASTER_PORT=", env.master_addr, ":", env.master_port,
                    " failed within ", timeout.count() / 1000.0, " s (train.distributed.timeout_s): ", short_what(e)));
  }
  try {
    // Gloo for CPU tensors (and CUDA ones without NCCL: it stages them through the host); NCCL,
    // when asked for, takes the CUDA tensors. Each backend keys its rendezvous under its own prefix.
    auto options = c10d::ProcessGroupGloo::Options::create(timeout);
    // GLOO_SOCKET_IFNAME picks the interface as in PyTorch; loopback rendezvous stays on loopback
    // (no dependence on how the host name resolves); otherwise the host name's address.
    if (const char* ifname = std::getenv("GLOO_SOCKET_IFNAME"); ifname != nullptr && *ifname != '\0')
      options->devices.push_back(c10d::ProcessGroupGloo::createDeviceForInterface(ifname));
    else if (is_loopback(env.master_addr))
      options->devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1"));
    else
      options->devices.push_back(c10d::ProcessGroupGloo::createDefaultDevice());
    options->threads = 2;
    impl_->gloo = c10::make_intrusive<c10d::ProcessGroupGloo>(
        c10::make_intrusive<c10d::PrefixStore>("gloo", impl_->store), env.rank, env.world_size, options);
    if (with_nccl) {
#if DETSEG_WITH_NCCL
      auto nccl_options = c10d::ProcessGroupNCCL::Options::create();
      nccl_options->timeout = timeout;
      impl_->nccl = c10::make_intrusive<c10d::ProcessGroupNCCL>(
          c10::make_intrusive<c10d::PrefixStore>("nccl", impl_->store), env.rank, env.world_size, nccl_options);
#else
      DETSEG_CONFIG_CHECK(false, "train.distributed.backend: nccl: this detseg was built without NCCL");
#endif
    }
  } catch (const std::exception& e) {
    throw Error(str(where, ": creating the process group failed: ", short_what(e)));
  }
  log_debug(where, ": ", backend(), " process group ready (", env.master_addr, ":", env.master_port, ")");
}

ProcessGroup::~ProcessGroup() = default;

std::string ProcessGroup::backend() const { return impl_->nccl ? "nccl (CUDA tensors) + gloo (CPU)" : "gloo"; }

namespace {

// `on_nccl`: the work is NCCL's, and wait() only orders the current CUDA stream after it (no host
// wait; NCCL's watchdog enforces the timeout given at creation). A timeout here would make the host
// block until the collective ends.
void wait_work(const c10::intrusive_ptr<c10d::Work>& work, const std::string& what, const Environment& env,
               std::chrono::milliseconds timeout, bool on_nccl = false) {
  try {
    if (on_nccl)
      work->wait();
    else
      work->wait(timeout);
  } catch (const std::exception& e) {
    throw Error(str("distributed: rank ", env.rank, " of ", env.world_size, ": ", what,
                    " failed: a peer process died, hung past train.distributed.timeout_s=", timeout.count() / 1000.0,
                    " s, or left the job (", short_what(e), ")"));
  }
}

}  // namespace

void ProcessGroup::broadcast(std::vector<at::Tensor>& tensors, int root) {
  c10d::BroadcastOptions options;
  options.rootRank = root;
  options.timeout = timeout_;
  // One tensor per call: Gloo's broadcast takes a list only for multi-device inputs.
  for (auto& t : tensors) {
    std::vector<at::Tensor> one{t};
    c10::intrusive_ptr<c10d::Work> work;
    try {
      work = impl_->for_tensor(t).broadcast(one, options);
    } catch (const std::exception& e) {
      throw Error(str("distributed: rank ", env_.rank, ": broadcast failed: ", short_what(e)));
    }
    wait_work(work, "broadcast", env_, timeout_, impl_->on_nccl(t));
  }
}

Pending ProcessGroup::all_reduce_sum_async(at::Tensor tensor) {
  c10d::AllreduceOptions options;
  options.reduceOp = c10d::ReduceOp::SUM;
  options.timeout = timeout_;
  c10d::Backend& backend = impl_->for_tensor(tensor);
  const bool on_nccl = impl_->on_nccl(tensor);
  std::vector<at::Tensor> one{std::move(tensor)};
  c10::intrusive_ptr<c10d::Work> work;
  try {
    work = backend.allreduce(one, options);
  } catch (const std::exception& e) {
    throw Error(str("distributed: rank ", env_.rank, ": all-reduce failed: ", short_what(e)));
  }
  return Pending([work, env = env_, timeout = timeout_, on_nccl] { wait_work(work, "all-reduce", env, timeout, on_nccl); });
}

std::vector<std::string> ProcessGroup::all_gather_bytes(const std::string& mine) {
  const int w = env_.world_size;
  at::Tensor size = at::tensor({static_cast<int64_t>(mine.size())}, at::kLong);
  std::vector<std::vector<at::Tensor>> sizes_out(1);
  for (int r = 0; r < w; ++r) sizes_out[0].push_back(at::empty({1}, at::kLong));
  std::vector<at::Tensor> in{size};
  c10d::AllgatherOptions options;
  options.timeout = timeout_;
  wait_work(impl_->gloo->allgather(sizes_out, in, options), "all-gather", env_, timeout_);
  int64_t max_size = 1;
  for (auto& s : sizes_out[0]) max_size = std::max(max_size, s.item<int64_t>());
  // All-gather needs equal sizes: pad every rank's bytes to the largest.
  at::Tensor bytes = at::zeros({max_size}, at::kByte);
  if (!mine.empty()) std::memcpy(bytes.data_ptr<uint8_t>(), mine.data(), mine.size());
  std::vector<std::vector<at::Tensor>> bytes_out(1);
  for (int r = 0; r < w; ++r) bytes_out[0].push_back(at::empty({max_size}, at::kByte));
  std::vector<at::Tensor> bytes_in{bytes};
  wait_work(impl_->gloo->allgather(bytes_out, bytes_in, options), "all-gather", env_, timeout_);
  std::vector<std::string> result;
  for (int r = 0; r < w; ++r) {
    const auto n = static_cast<size_t>(sizes_out[0][static_cast<size_t>(r)].item<int64_t>());
    result.emplace_back(reinterpret_cast<const char*>(bytes_out[0][static_cast<size_t>(r)].data_ptr<uint8_t>()), n);
  }
  return result;
}

void ProcessGroup::barrier() {
  c10d::BarrierOptions options;
  options.timeout = timeout_;
  wait_work(impl_->gloo->barrier(options), "barrier", env_, timeout_);
}

}  // namespace detseg::dist
