#include "resnet50_shapes.h"

#include <string>

namespace tfmpi::bench {
namespace {

class Builder {
 public:
  explicit Builder(const ResNet50Config& config) : config_(config) {}

  // Conv2D(filters, k x k) on `in` channels, then its BatchNormalization.
  void ConvBn(const std::string& prefix, std::int64_t k, std::int64_t in, std::int64_t out) {
    Add(prefix + "_conv/kernel", {k, k, in, out});
    if (config_.conv_bias) Add(prefix + "_conv/bias", {out});
    Add(prefix + "_bn/gamma", {out});
    Add(prefix + "_bn/beta", {out});
    Add(prefix + "_bn/moving_mean", {out}, /*trainable=*/false);
    Add(prefix + "_bn/moving_variance", {out}, /*trainable=*/false);
  }

  // Keras block1: bottleneck 1x1 -> 3x3 -> 1x1 (x4), with an optional 1x1
  // projection shortcut. Returns the output channel count.
  std::int64_t Bottleneck(const std::string& name, std::int64_t in, std::int64_t filters,
                          bool projection) {
    if (projection) ConvBn(name + "_0", 1, in, 4 * filters);
    ConvBn(name + "_1", 1, in, filters);
    ConvBn(name + "_2", 3, filters, filters);
    ConvBn(name + "_3", 1, filters, 4 * filters);
    return 4 * filters;
  }

  void Dense(const std::string& name, std::int64_t in, std::int64_t out) {
    Add(name + "/kernel", {in, out});
    Add(name + "/bias", {out});
  }

  std::vector<ModelVariable> Take() { return std::move(vars_); }

 private:
  void Add(std::string name, Shape shape, bool trainable = true) {
    vars_.push_back({std::move(name), std::move(shape), trainable});
  }

  ResNet50Config config_;
  std::vector<ModelVariable> vars_;
};

struct Stage {
  std::int64_t filters;
  int blocks;
};
constexpr Stage kStages[] = {{64, 3}, {128, 4}, {256, 6}, {512, 3}};

}  // namespace

std::vector<ModelVariable> ResNet50Variables(const ResNet50Config& config) {
  Builder b(config);
  b.ConvBn("conv1", 7, 3, 64);
  std::int64_t channels = 64;
  int stage_number = 2;  // Keras names the stages conv2..conv5
  for (const Stage& stage : kStages) {
    for (int block = 1; block <= stage.blocks; ++block) {
      const std::string name =
          "conv" + std::to_string(stage_number) + "_block" + std::to_string(block);
      channels = b.Bottleneck(name, channels, stage.filters, /*projection=*/block == 1);
    }
    ++stage_number;
  }
  b.Dense("predictions", channels, config.classes);
  return b.Take();
}

std::vector<ModelVariable> TrainableOnly(const std::vector<ModelVariable>& variables) {
  std::vector<ModelVariable> out;
  for (const ModelVariable& v : variables)
    if (v.trainable) out.push_back(v);
  return out;
}

std::int64_t TotalElements(const std::vector<ModelVariable>& variables) {
  std::int64_t n = 0;
  for (const ModelVariable& v : variables) n += NumElements(v.shape);
  return n;
}

}  // namespace tfmpi::bench
