// The start-up check of the settings every rank must share (Note [Settings
// every rank shares]): the encoding, the comparison and its wording, and the
// engine refusing to start over the in-process transport.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <functional>
#include <future>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "contains.h"
#include "engine_ranks.h"
#include "tfmpi/engine/shared_settings.h"
#include "tfmpi/planning/settings_agreement.h"

namespace tfmpi {
namespace {

using planning::DecodeSettings;
using planning::EncodeSettings;
using planning::Settings;
using planning::SettingsDisagreement;
using testing::Contains;

TEST(SettingsEncoding, RoundTripsAnyBytes) {
  const Settings s = {{"A", "1"}, {"", ""},
                      {std::string("with\nnewline=and\0nul", 21), std::string("v\0\xff", 3)}};
  Settings back;
  ASSERT_TRUE(DecodeSettings(EncodeSettings(s), &back));
  EXPECT_EQ(back, s);
  EXPECT_EQ(back[2].first.size(), 21u);
  ASSERT_TRUE(DecodeSettings(EncodeSettings({}), &back));
  EXPECT_TRUE(back.empty());
  EXPECT_FALSE(DecodeSettings("", &back));  // no format tag: another build's encoding
  const std::string text = EncodeSettings({{"NAME", "value"}});
  const std::size_t tag_only = EncodeSettings({}).size();  // a whole, empty encoding
  for (std::size_t cut = 1; cut < text.size(); ++cut) {
    if (cut != tag_only) {
      EXPECT_FALSE(DecodeSettings(text.substr(0, cut), &back)) << "cut at " << cut;
    }
  }
}

TEST(SettingsDisagreement, SameSettingsAgree) {
  const std::string one = EncodeSettings({{"A", "1"}, {"B", "x"}});
  EXPECT_EQ(SettingsDisagreement({}), "");
  EXPECT_EQ(SettingsDisagreement({one}), "");
  EXPECT_EQ(SettingsDisagreement({one, one, one}), "");
  // Order and repeats do not matter: the first value of a name counts.
  EXPECT_EQ(SettingsDisagreement({one, EncodeSettings({{"B", "x"}, {"A", "1"}, {"A", "2"}})}), "");
}

TEST(SettingsDisagreement, NamesEachDifferenceWithTheRanksAndValues) {
  const std::string base = EncodeSettings({{"TFMPI_SHARES", "adaptive"}, {"TFMPI_SEED", "7"}});
  const std::string equal = EncodeSettings({{"TFMPI_SHARES", "equal"}, {"TFMPI_SEED", "7"}});
  const std::string extra =
      EncodeSettings({{"TFMPI_SHARES", "adaptive"}, {"TFMPI_SEED", "7"}, {"TF_USE_LEGACY_KERAS", "1"}});
  const std::string m = SettingsDisagreement({base, base, base, equal, extra});
  EXPECT_TRUE(Contains(m, {"different settings",
                           "  TFMPI_SHARES: ranks 0-2, 4 have 'adaptive'; rank 3 has 'equal'",
                           "  TF_USE_LEGACY_KERAS: ranks 0-3 have (not set); rank 4 has '1'",
                           "tfmpirun passes its whole environment"}))
      << m;
  EXPECT_EQ(m.find("TFMPI_SEED"), std::string::npos) << m;  // the same everywhere
}

TEST(SettingsDisagreement, AnUnreadableRankIsNamed) {
  const std::string good = EncodeSettings({{"A", "1"}});
  const std::string m = SettingsDisagreement({good, "\x05", good});
  EXPECT_TRUE(Contains(m, {"rank(s) 1 sent settings that could not be read"})) << m;
  EXPECT_EQ(m.find("  A:"), std::string::npos) << m;  // the readable ranks agree
}

TEST(SharedSettings, AutotuneSaysWhatItSearches) {
  EngineOptions o;
  Settings s = SharedSettings(o, 4);
  auto has = [&](const std::string& name) {
    for (const auto& kv : s)
      if (kv.first == name) return true;
    return false;
  };
  EXPECT_TRUE(has("tfmpi version") && has("TFMPI_FUSION_THRESHOLD") && has("TFMPI_CACHE_CAPACITY"));
  o.autotune.enabled = true;
  o.autotune.fixed_fusion = true;
  o.caller_settings = {{"TFMPI_BATCH_MODE", "global"}};
  s = SharedSettings(o, 4);
  EXPECT_EQ(s.back(), (std::pair<std::string, std::string>{"TFMPI_BATCH_MODE", "global"}));
  bool found = false;
  for (const auto& [name, value] : s)
    if (name.rfind("what TFMPI_AUTOTUNE searches", 0) == 0) {
      found = true;
      EXPECT_EQ(value, "TFMPI_MAX_MESSAGE_ELEMENTS, TFMPI_DIRECT_THRESHOLD");
    }
  EXPECT_TRUE(found);
}

// Values in effect are compared: the message size left to its default and
// set to what the default is at this world size agree.
TEST(SharedSettings, TheMessageSizeInEffectIsCompared) {
  EngineOptions unset, set;
  set.max_message_elements = MessageElementsFor(0, 8);
  EXPECT_EQ(SharedSettings(unset, 8), SharedSettings(set, 8));
  EXPECT_NE(SharedSettings(unset, 8), SharedSettings(unset, 2));  // 1 MiB x N grows with N
}

// Every engine parameter is either compared or listed as the rank's own, so
// a new one can't be forgotten.
TEST(SharedSettings, EveryEngineParameterIsSharedOrPerRank) {
  EngineOptions o;
  o.autotune.enabled = true;
  std::set<std::string> shared;
  for (const auto& kv : SharedSettings(o, 2)) shared.insert(kv.first);
  const auto& own = PerRankEngineParams();
  for (const ParamSpec& spec : EngineParams().specs()) {
    const bool is_own = std::find(own.begin(), own.end(), spec.name) != own.end();
    EXPECT_NE(shared.count(spec.name) != 0, is_own)
        << spec.name << ": compared across ranks, or the rank's own; exactly one";
  }
}

// Counts Abandon() calls (Note [Abandoning MPI]).
class CountsAbandon final : public testing::ForwardingCommunicator {
 public:
  CountsAbandon(std::unique_ptr<Communicator> inner, std::atomic<int>* count)
      : ForwardingCommunicator(std::move(inner)), count_(count) {}
  void Abandon() override {
    ++*count_;
    ForwardingCommunicator::Abandon();
  }

 private:
  std::atomic<int>* count_;
};

using Wrap = std::function<std::unique_ptr<Communicator>(int rank, std::unique_ptr<Communicator>)>;

// Engine::Start on `size` rank threads over one in-process world, rank r with
// options_of(r) and its communicator wrapped by `wrap`; each rank's Start status.
std::vector<Status> StartRanks(int size, const std::function<EngineOptions(int)>& options_of,
                               const Wrap& wrap,
                               const std::function<void(int rank)>& after_start = {}) {
  auto world = std::make_shared<InProcWorld>(size);
  std::vector<Status> started(static_cast<std::size_t>(size));
  testing::Spawn(size, [&](int rank) {
    std::unique_ptr<Engine> engine;
    started[rank] = Engine::Start(
        options_of(rank),
        [&](std::unique_ptr<Communicator>* out) {
          *out = wrap(rank, std::make_unique<InProcCommunicator>(world, rank));
          return Status::Ok();
        },
        &engine);
    if (after_start) after_start(rank);
    EXPECT_EQ(engine == nullptr, !started[rank].ok());
  });
  return started;
}

// Ranks whose options differ never start: rank 0 says what differs, every
// other rank fails too (no rank is left waiting in a first collective).
// Rank 0's list is written before any other rank is released (Note [Reported
// before released]): the report holds the others inside the check.
TEST(EngineStart, RefusesRanksWithDifferentSettings) {
  constexpr int kSize = 3;
  std::atomic<int> abandoned{0};
  std::string report;
  std::promise<void> reported;
  std::shared_future<void> reported_future = reported.get_future().share();
  std::atomic<int> released_before_report{0};
  const std::vector<Status> started = StartRanks(kSize, [&](int rank) {
    EngineOptions o = testing::TestOptions();
    if (rank == 2) o.fusion_threshold = 0;
    o.caller_settings = {{"TFMPI_SHARES", rank == 1 ? "equal" : "adaptive"}};
    o.report_settings = [&](const std::string& list) {
      // The others must still be inside the check: none returns meanwhile.
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      report = list;
      reported.set_value();
    };
    return o;
  }, [&](int, std::unique_ptr<Communicator> c) -> std::unique_ptr<Communicator> {
    return std::make_unique<CountsAbandon>(std::move(c), &abandoned);
  }, [&](int rank) {
    if (rank != 0 && reported_future.wait_for(std::chrono::seconds(0)) !=
                         std::future_status::ready) {
      ++released_before_report;
    }
  });
  for (int r = 0; r < kSize; ++r) EXPECT_FALSE(started[r].ok()) << "rank " << r;
  // Every rank failed in the check together: MPI is left to end normally.
  EXPECT_EQ(abandoned.load(), 0);
  EXPECT_EQ(released_before_report.load(), 0);
  EXPECT_TRUE(Contains(report,
                       {"TFMPI_FUSION_THRESHOLD: ranks 0, 1 have '67108864'; rank 2 has '0'",
                        "TFMPI_SHARES: ranks 0, 2 have 'adaptive'; rank 1 has 'equal'"}))
      << report;
  EXPECT_TRUE(Contains(started[0].message(), {"different settings (listed above)"}))
      << started[0].ToString();
  for (int r = 1; r < kSize; ++r)
    EXPECT_TRUE(Contains(started[r].message(), {"different settings (rank 0 lists them)"}))
        << started[r].ToString();
}

// A rank whose check throws (its transport failed) abandons the world, so the
// ranks inside the check with it fail to start too instead of waiting forever.
class ThrowsInGather final : public testing::ForwardingCommunicator {
 public:
  using ForwardingCommunicator::ForwardingCommunicator;
  Status GatherToRoot(const std::string&, std::vector<std::string>*) override {
    throw std::runtime_error("the link went down");
  }
};

TEST(EngineStart, AFailedCheckOnOneRankFailsEveryRank) {
  constexpr int kSize = 3;
  std::atomic<int> abandoned{0};
  // Without the abandon the other ranks would wait in the gather forever (the
  // test's CTest timeout ends it).
  const std::vector<Status> started = StartRanks(
      kSize, [](int) { return testing::TestOptions(); },
      [&](int rank, std::unique_ptr<Communicator> c) -> std::unique_ptr<Communicator> {
        if (rank != 1) return c;
        return std::make_unique<ThrowsInGather>(
            std::make_unique<CountsAbandon>(std::move(c), &abandoned));
      });
  EXPECT_EQ(abandoned.load(), 1);  // the rank that failed alone
  for (int r = 0; r < kSize; ++r) EXPECT_FALSE(started[r].ok()) << "rank " << r;
  EXPECT_TRUE(Contains(started[1].message(), {"the link went down"})) << started[1].ToString();
}

}  // namespace
}  // namespace tfmpi
