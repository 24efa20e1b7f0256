// Implements: tests of the checkpoint format (round trip, truncation, corruption, foreign files),
// the model_dir manager (keep N, index, latest), a writer killed mid-save, and exact resume.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <torch/optim.h>
#include <unistd.h>

#include <csignal>
#include <filesystem>
#include <fstream>
#include <thread>

#include "detseg/core/error.h"
#include "detseg/core/files.h"
#include "detseg/train/checkpoint.h"
#include "detseg/train/ema.h"
#include "detseg/train/optimizer.h"
#include "tiny_modules.h"
#include "test_paths.h"

namespace detseg {
namespace {
namespace fs = std::filesystem;

// A fresh folder per test, removed afterwards.
class CheckpointTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           str("detseg_ckpt_", ::getpid(), "_",
               ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  fs::path dir_;
};

Checkpoint sample_checkpoint(int64_t step) {
  Checkpoint c;
  c.step = step;
  c.model = {{"a.weight", torch::arange(6, torch::kFloat).reshape({2, 3}) * float(step)},
             {"a.count", torch::tensor({int64_t(1) << 40, int64_t(-3)})},
             {"half", torch::tensor({0.5, -2.0}).to(torch::kHalf)},
             {"flag", torch::tensor({true, false})},
             {"empty", torch::zeros({0, 4})},
             {"strided", torch::arange(12, torch::kDouble).reshape({3, 4}).t()}};
  c.ema = {{"a.weight", torch::ones({2, 3})}};
  c.rng = rng_states();
  c.optimizer = std::string("opt\0state", 9);
  c.metadata_json = R"({"config":"tiny","lr":0.5})";
  return c;
}

void expect_same(const NamedTensors& a, const NamedTensors& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].first, b[i].first);
    EXPECT_EQ(a[i].second.scalar_type(), b[i].second.scalar_type()) << a[i].first;
    EXPECT_TRUE(torch::equal(a[i].second, b[i].second)) << a[i].first;
  }
}

TEST_F(CheckpointTest, RoundTrip) {
  const Checkpoint c = sample_checkpoint(12);
  write_checkpoint(path("x.dsckpt"), c);
  EXPECT_TRUE(is_checkpoint_file(path("x.dsckpt")));
  const Checkpoint r = read_checkpoint(path("x.dsckpt"));
  EXPECT_EQ(r.step, 12);
  expect_same(r.model, c.model);
  expect_same(r.ema, c.ema);
  expect_same(r.rng, c.rng);
  EXPECT_EQ(r.optimizer, c.optimizer);
  EXPECT_EQ(r.metadata_json, R"({"config":"tiny","lr":0.5})");
  for (const auto& e : fs::directory_iterator(dir_))  // no temp file left behind
    EXPECT_EQ(e.path().filename(), "x.dsckpt");
}

void expect_error_containing(const std::string& file, const std::string& needle) {
  try {
    read_checkpoint(file);
    ADD_FAILURE() << "no error for " << file;
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find(file), std::string::npos) << msg;
    EXPECT_NE(msg.find(needle), std::string::npos) << msg;
  }
}

TEST_F(CheckpointTest, TruncatedAtAnyLengthIsAClearError) {
  write_checkpoint(path("full.dsckpt"), sample_checkpoint(3));
  const std::string bytes = read_file(path("full.dsckpt"));
  // Inside the magic, the fixed prefix, the JSON header, the payload and the footer.
  for (size_t len : {size_t(0), size_t(5), size_t(8), size_t(20), size_t(24), size_t(60),
                     bytes.size() / 2, bytes.size() - 13, bytes.size() - 5, bytes.size() - 1}) {
    write_file_atomic(path("cut.dsckpt"), bytes.substr(0, len));
    SCOPED_TRACE(len);
    expect_error_containing(path("cut.dsckpt"), len < 8 ? "not a detseg checkpoint" : "truncated");
  }
}

TEST_F(CheckpointTest, MetadataAloneReadsOnlyTheHeader) {
  write_checkpoint(path("full.dsckpt"), sample_checkpoint(3));
  EXPECT_EQ(read_checkpoint_metadata(path("full.dsckpt")), R"({"config":"tiny","lr":0.5})");
  const std::string bytes = read_file(path("full.dsckpt"));
  // Cut inside the payload: the header is whole, so the metadata still reads (the weights would not).
  write_file_atomic(path("cut.dsckpt"), bytes.substr(0, bytes.size() - 100));
  EXPECT_EQ(read_checkpoint_metadata(path("cut.dsckpt")), R"({"config":"tiny","lr":0.5})");
  EXPECT_THROW(read_checkpoint(path("cut.dsckpt")), Error);
  // Cut inside the magic, the fixed prefix or the JSON header: errors naming the file.
  for (size_t len : {size_t(5), size_t(20), size_t(60)}) {
    SCOPED_TRACE(len);
    write_file_atomic(path("cut.dsckpt"), bytes.substr(0, len));
    try {
      read_checkpoint_metadata(path("cut.dsckpt"));
      ADD_FAILURE() << "no error";
    } catch (const Error& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find(path("cut.dsckpt")), std::string::npos) << msg;
      EXPECT_NE(msg.find(len < 8 ? "not a detseg checkpoint" : "truncated"), std::string::npos) << msg;
    }
  }
  EXPECT_THROW(read_checkpoint_metadata(path("missing.dsckpt")), Error);
}

TEST_F(CheckpointTest, CorruptForeignAndPthFiles) {
  write_checkpoint(path("full.dsckpt"), sample_checkpoint(3));
  std::string bytes = read_file(path("full.dsckpt"));
  bytes[bytes.size() - 40] ^= 0x01;  // one bit in the payload
  write_file_atomic(path("flip.dsckpt"), bytes);
  expect_error_containing(path("flip.dsckpt"), "CRC32C mismatch");
  write_file_atomic(path("text.dsckpt"), "hello, this is not a checkpoint at all\n");
  expect_error_containing(path("text.dsckpt"), "not a detseg checkpoint");
  expect_error_containing(std::string(DETSEG_SOURCE_DIR) + "/tests/fixtures/pth/mixed.pth",
                          "torch.save");
  expect_error_containing(path("missing.dsckpt"), "cannot open");
  std::string newer = read_file(path("full.dsckpt"));
  newer[8] = 9;  // format version 9
  write_file_atomic(path("newer.dsckpt"), newer);
  expect_error_containing(path("newer.dsckpt"), "version 9");
}

TEST_F(CheckpointTest, ManagerKeepsNewestAndTracksLatest) {
  CheckpointManager m({(dir_ / "run").string(), 3, 5});
  EXPECT_FALSE(m.latest().has_value());
  EXPECT_FALSE(model_dir_has_checkpoint((dir_ / "run").string()));
  for (int64_t step : {5, 10, 15, 20, 25}) m.save(sample_checkpoint(step));
  std::vector<int64_t> steps;
  for (const auto& e : m.list()) steps.push_back(e.step);
  EXPECT_EQ(steps, (std::vector<int64_t>{15, 20, 25}));
  ASSERT_TRUE(m.latest().has_value());
  EXPECT_EQ(*m.latest(), m.path_for_step(25));
  EXPECT_EQ(read_checkpoint(*m.latest()).step, 25);
  EXPECT_NE(read_file(m.index_path()).find("\"latest\": \"ckpt-25.dsckpt\""), std::string::npos);
  EXPECT_TRUE(model_dir_has_checkpoint((dir_ / "run").string()));
  // The index is a hint: a stale or missing one falls back to the highest step on disk.
  write_file_atomic(m.index_path(), R"({"latest": "ckpt-99.dsckpt"})");
  EXPECT_EQ(*m.latest(), m.path_for_step(25));
  fs::remove(m.index_path());
  EXPECT_EQ(*m.latest(), m.path_for_step(25));
  EXPECT_TRUE(m.due(10));
  EXPECT_FALSE(m.due(11));
  EXPECT_FALSE(m.due(0));
  EXPECT_THROW(CheckpointManager({"", 7, 10}), ConfigError);
  EXPECT_THROW(CheckpointManager({"x", 7, 0}), ConfigError);
}

// A child process saves the next checkpoint and is SIGKILLed halfway through the write; the
// previous checkpoint must stay the latest and load, and the next save cleans the temp file.
TEST_F(CheckpointTest, KillDuringSaveKeepsPreviousCheckpoint) {
  const std::string run = (dir_ / "run").string();
  CheckpointManager m({run, 7, 1});
  m.save(sample_checkpoint(1));
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    CheckpointManager cm({run, 7, 1});
    Checkpoint big = sample_checkpoint(2);
    big.model.emplace_back("big", torch::ones({4096}));  // several write() calls
    cm.save(big, [](size_t written, size_t total) {
      if (written >= total / 2) ::raise(SIGKILL);
    });
    ::_exit(0);  // reached only if the hook never fired
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFSIGNALED(status)) << "child exited normally: status " << status;
  EXPECT_EQ(WTERMSIG(status), SIGKILL);
  bool temp_left = false;
  for (const auto& e : fs::directory_iterator(run))
    temp_left = temp_left || e.path().filename().string().find(".tmp.") != std::string::npos;
  EXPECT_TRUE(temp_left) << "the child should have died with a half-written temp file";
  ASSERT_TRUE(m.latest().has_value());
  EXPECT_EQ(*m.latest(), m.path_for_step(1));
  EXPECT_EQ(read_checkpoint(*m.latest()).step, 1);
  m.save(sample_checkpoint(3));
  for (const auto& e : fs::directory_iterator(run))
    EXPECT_EQ(e.path().filename().string().find(".tmp."), std::string::npos) << e.path();
}

TEST_F(CheckpointTest, LoadModuleStateChecksNamesAndShapes) {
  testing::TinyNet a, b;
  testing::fill_tiny(*a);
  load_module_state(*b, module_state(*a), "test");
  EXPECT_TRUE(torch::equal(b->fc1->weight, a->fc1->weight));
  NamedTensors state = module_state(*a);
  state[0].second = torch::zeros({3, 3});
  state.emplace_back("extra.weight", torch::zeros({1}));
  try {
    load_module_state(*b, state, "somefile");
    FAIL();
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("somefile"), std::string::npos);
    EXPECT_NE(msg.find("fc1.weight"), std::string::npos) << msg;
    EXPECT_NE(msg.find("extra.weight"), std::string::npos) << msg;
  }
}

// ---- exact resume: 20 steps straight == 10 steps, save, load into fresh objects, 10 steps, stepped
// as the training loop steps (TrainOptimizer::step; Adam's step counts kept on the device and
// written into the state before the save).
struct TrainRun {
  testing::TinyNet net;
  TrainOptimizer opt;
  TrainRun(uint64_t init_seed, const std::string& type) {
    torch::manual_seed(init_seed);
    net = testing::TinyNet();
    OptimizerOptions o;
    o.type = type;
    o.multipliers = {{R"(bias$)", 2.0}};
    opt = build_optimizer(select_parameters(*net, o), o, 0.05);
  }
  void steps(int from, int to) {
    for (int step = from; step < to; ++step) {
      opt.set_learning_rate(0.05 / (1 + step));
      // Data and dropout draw from the global generator, so its state must be restored too.
      torch::Tensor x = torch::randn({8, 2});
      torch::Tensor y = x.sum(1, true) + 0.1 * torch::randn({8, 1});
      torch::Tensor out = torch::dropout(net->forward(x), 0.2, true);
      torch::Tensor loss = (out - y).pow(2).mean();
      opt.optimizer->zero_grad();
      loss.backward();
      clip_gradients_by_global_norm(std::vector<torch::Tensor>(net->parameters()), 5.0);
      opt.step(torch::zeros({}));
    }
  }
};

TEST_F(CheckpointTest, ResumeIsBitExact) {
  for (const std::string type : {"momentum", "adam"}) {
    TrainRun straight(1, type);
    torch::manual_seed(42);
    straight.steps(0, 20);

    TrainRun first(1, type);
    torch::manual_seed(42);
    first.steps(0, 10);
    CheckpointManager m({(dir_ / ("run_" + type)).string(), 7, 10});
    first.opt.sync_state();
    m.save(capture_training_state(10, *first.net, first.opt.optimizer.get(), nullptr));

    torch::manual_seed(999);  // a different generator state and init: the checkpoint must restore all
    TrainRun resumed(7, type);
    const int64_t step = restore_training_state(*m.latest(), *resumed.net, resumed.opt.optimizer.get(), nullptr);
    EXPECT_EQ(step, 10);
    resumed.steps(static_cast<int>(step), 20);
    const Checkpoint r = read_checkpoint(*m.latest());

    const NamedTensors a = module_state(*straight.net), b = module_state(*resumed.net);
    ASSERT_EQ(a.size(), b.size());
    for (size_t i = 0; i < a.size(); ++i)
      EXPECT_TRUE(torch::equal(a[i].second, b[i].second)) << type << " " << a[i].first << "\n"
                                                          << a[i].second << b[i].second;
    // And the run without the RNG restore differs (the test can fail).
    TrainRun no_rng(7, type);
    load_module_state(*no_rng.net, r.model, "x");
    load_optimizer_state(*no_rng.opt.optimizer, r.optimizer);
    no_rng.steps(10, 20);
    EXPECT_FALSE(torch::equal(module_state(*no_rng.net)[0].second, a[0].second)) << type;
  }
}

TEST_F(CheckpointTest, TrainingStateWithEmaAndEvalWeights) {
  testing::TinyNet net;
  testing::fill_tiny(*net);
  WeightEma ema(*net, EmaOptions{});
  {
    torch::NoGradGuard g;
    net->head->bias.fill_(1.25);
  }
  ema.update(*net, 0);  // head.bias average: 1.15
  const std::string file = path("ckpt-3.dsckpt");
  write_checkpoint(file, capture_training_state(3, *net, nullptr, &ema, R"({"note":"x"})"));
  testing::TinyNet eval_net;
  EXPECT_EQ(load_weights_for_eval(file, *eval_net), 3);
  EXPECT_NEAR(eval_net->head->bias.item<double>(), 1.15, 1e-6);  // the average
  EXPECT_TRUE(torch::equal(eval_net->bn->num_batches_tracked, net->bn->num_batches_tracked));
  load_weights_for_eval(file, *eval_net, /*use_ema=*/false);
  EXPECT_NEAR(eval_net->head->bias.item<double>(), 1.25, 1e-6);  // the raw weights
  testing::TinyNet resumed;
  WeightEma resumed_ema(*resumed, EmaOptions{});
  EXPECT_EQ(restore_training_state(file, *resumed, nullptr, &resumed_ema), 3);
  EXPECT_NEAR(resumed_ema.shadow()[5].second.item<double>(), 1.15, 1e-6);
  EmaScope scope(&ema, *net);
  EXPECT_THROW(capture_training_state(3, *net, nullptr, &ema), Error);  // averages swapped in
}

// A continuous evaluator watching a trainer: each new checkpoint is seen once, in order, fully
// written, and the watcher stops after the wait interval passes with nothing new.
TEST_F(CheckpointTest, WatcherFollowsATrainer) {
  const std::string run = (dir_ / "run").string();
  CheckpointWatcher watcher({run, /*wait_interval_s=*/1.0, /*poll_interval_s=*/0.02,
                             /*first_checkpoint_timeout_s=*/5.0});
  std::thread trainer([run] {
    CheckpointManager m({run, 7, 1});
    for (int64_t step = 1; step <= 3; ++step) {
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
      m.save(sample_checkpoint(step));
    }
  });
  std::vector<int64_t> seen;
  const auto start = std::chrono::steady_clock::now();
  while (auto path = watcher.next()) seen.push_back(read_checkpoint(*path).step);
  const double took =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  trainer.join();
  EXPECT_EQ(seen, (std::vector<int64_t>{1, 2, 3}));
  EXPECT_GE(took, 1.9);  // 3 x 0.3 s of training, then 1 s of waiting
  EXPECT_LT(took, 5.0);
  // No checkpoint at all: gives up after the first-checkpoint timeout.
  CheckpointWatcher empty({(dir_ / "none").string(), 1.0, 0.02, 0.1});
  EXPECT_FALSE(empty.next().has_value());
}

}  // namespace
}  // namespace detseg
