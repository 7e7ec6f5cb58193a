// ResNet-50 variable shapes, derived from the architecture (not a pasted list),
// as the benchmark's realistic gradient set.
//
// Note [ResNet-50 layout]
// The layout is Keras' keras.applications.ResNet50 (include_top=True): a 7x7
// stem conv, four stages of bottleneck blocks (3, 4, 6, 3 blocks of widths
// 64, 128, 256, 512, expansion 4, a 1x1 projection shortcut in each stage's
// first block), then global average pooling and a dense classifier. Keras
// builds every conv with use_bias=True, and every BatchNormalization has
// trainable gamma/beta plus non-trainable moving mean/variance. Names follow
// Keras ("conv2_block1_0_conv/kernel"), kernels are HWIO.
// Where a stage's stride sits (first 1x1 conv in Keras' v1, the 3x3 conv in
// "v1.5") does not change any shape. With conv biases dropped (the
// torchvision layout) the same architecture has 161 parameter tensors.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tfmpi/common/types.h"

namespace tfmpi::bench {

struct ModelVariable {
  std::string name;  // "conv1_conv/kernel"
  Shape shape;
  bool trainable = true;
};

struct ResNet50Config {
  int classes = 1000;
  bool conv_bias = true;  // Keras: true; torchvision: false
};

// Every variable of the model in construction order (stem, stages, classifier).
std::vector<ModelVariable> ResNet50Variables(const ResNet50Config& config = {});

// The trainable subset: the tensors a data-parallel step allreduces.
std::vector<ModelVariable> TrainableOnly(const std::vector<ModelVariable>& variables);

std::int64_t TotalElements(const std::vector<ModelVariable>& variables);

// Keras' own figures for ResNet50(weights=None), to check the derivation.
inline constexpr std::int64_t kKerasResNet50Params = 25'636'712;
inline constexpr std::int64_t kKerasResNet50TrainableParams = 25'583'592;

}  // namespace tfmpi::bench
