// Implements: the distributed runtime detseg trains on: torchrun's environment variables
// (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT), rendezvous through c10d's TCPStore, and
// c10d process groups: Gloo for CPU tensors (the control messages), NCCL for CUDA tensors when a
// run on GPUs asks for it (train.distributed.backend, auto by default). The c10d types stay inside
// process_group.cpp so nothing else needs the torch distributed headers. Every failed collective
// (dead peer, hung peer past the timeout) surfaces as detseg::Error naming the operation and rank.
#pragma once

#include <torch/types.h>

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace detseg::dist {

struct Environment {
  int rank = 0;
  int world_size = 1;  // 1 when WORLD_SIZE is unset: a plain single-process run
  int local_rank = 0;
  std::string master_addr = "127.0.0.1";
  int master_port = 29500;
  // torchrun's TORCHELASTIC_RESTART_COUNT: which attempt of the job this process belongs to. The
  // process group's store keys live under it, so a restarted job never reads the addresses the
  // previous attempt's (dead) workers left in torchrun's store.
  int restart_count = 0;
  // TORCHELASTIC_USE_AGENT_STORE=True: torchrun's agent already hosts the TCPStore at
  // MASTER_ADDR:MASTER_PORT (and keeps it across restarts); every rank connects as a client.
  bool agent_store = false;
};

// Reads torchrun's variables (and TORCHELASTIC_RESTART_COUNT, TORCHELASTIC_USE_AGENT_STORE);
// WORLD_SIZE unset means one process. Throws ConfigError naming the
// variable when one is malformed or inconsistent (RANK >= WORLD_SIZE, MASTER_PORT out of range).
Environment environment_from_env();

// A pending collective; wait() blocks until it is done and throws detseg::Error when it failed.
class Pending {
 public:
  Pending() = default;
  explicit Pending(std::function<void()> wait) : wait_(std::move(wait)) {}
  void wait() {
    if (wait_) std::exchange(wait_, nullptr)();
  }

 private:
  std::function<void()> wait_;
};

// train.distributed.backend for a run on `device`: auto is NCCL on CUDA where this build has it,
// else Gloo; gloo never uses NCCL; nccl needs a CUDA device and a build with NCCL (ConfigError).
bool use_nccl(const std::string& backend, const at::Device& device);

class ProcessGroup {
 public:
  // Rendezvous (rank 0 hosts the TCPStore at MASTER_ADDR:MASTER_PORT, unless torchrun's agent
  // does) and the backends, keyed under the restart attempt: Gloo
  // always, NCCL too when `with_nccl` (collectives on CUDA tensors then go through it). `timeout`
  // bounds the rendezvous and every collective: a peer that dies or hangs makes the others throw
  // within it.
  ProcessGroup(const Environment& env, std::chrono::milliseconds timeout, bool with_nccl = false);
  ~ProcessGroup();
  ProcessGroup(const ProcessGroup&) = delete;
  ProcessGroup& operator=(const ProcessGroup&) = delete;

  int rank() const { return env_.rank; }
  int world_size() const { return env_.world_size; }
  std::string backend() const;

  // In place, all tensors in one call (same order on every rank); each through its device's backend.
  void broadcast(std::vector<at::Tensor>& tensors, int root = 0);
  Pending all_reduce_sum_async(at::Tensor tensor);
  void all_reduce_sum(at::Tensor tensor) { all_reduce_sum_async(std::move(tensor)).wait(); }
  // Every rank's `mine`, in rank order (sizes may differ between ranks). Over Gloo, as barrier().
  std::vector<std::string> all_gather_bytes(const std::string& mine);
  void barrier();

 private:
  struct Impl;
  Environment env_;
  std::chrono::milliseconds timeout_;
  std::unique_ptr<Impl> impl_;
};

}  // namespace detseg::dist
