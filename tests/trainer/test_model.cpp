// SPDX-License-Identifier: Apache-2.0
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "trainer/dataset.hpp"
#include "trainer/model.hpp"
#include "trainer/optimizer.hpp"

namespace dtrain::trainer {
namespace {

struct Problem {
  MlpShape shape{{6, 5, 4, 3}};
  std::size_t batch = 4;
  std::vector<float> params;
  std::vector<float> inputs;
  std::vector<std::int32_t> labels;
};

Problem make_problem() {
  Problem p;
  p.params.resize(ParamLayout(p.shape).total());
  init_parameters(p.shape, 7, p.params);
  // Non-zero biases so their gradients are exercised through ReLU as well.
  const ParamLayout layout(p.shape);
  for (std::size_t l = 0; l < p.shape.layers(); ++l) {
    for (std::size_t k = 0; k < layout.bias(l).count; ++k) {
      p.params[layout.bias(l).offset + k] = 0.05f * static_cast<float>(k + 1);
    }
  }
  const SyntheticDataset data({3, 100, 6, 3});
  std::vector<std::uint64_t> indices = {0, 1, 2, 3};
  p.inputs.resize(p.batch * 6);
  p.labels.resize(p.batch);
  data.fill_batch(indices, p.inputs, p.labels);
  return p;
}

TEST(Model, LayoutIsRegistrationOrderAndContiguous) {
  const ParamLayout layout(MlpShape{{6, 5, 3}});
  ASSERT_EQ(layout.tensors().size(), 4u);
  EXPECT_EQ(layout.weight(0).offset, 0u);
  EXPECT_EQ(layout.weight(0).count, 30u);
  EXPECT_EQ(layout.bias(0).offset, 30u);
  EXPECT_EQ(layout.weight(1).offset, 35u);
  EXPECT_EQ(layout.bias(1).offset, 50u);
  EXPECT_EQ(layout.total(), 53u);
}

TEST(Model, GradientMatchesFiniteDifferences) {
  Problem p = make_problem();
  CpuMlp model(p.shape, p.batch);
  std::vector<float> grads(p.params.size());
  model.forward_backward(p.params, grads, p.inputs, p.labels, {});
  const auto mean_loss = [&](const std::vector<float>& params) {
    return model.evaluate(params, p.inputs, p.labels).loss_sum / static_cast<double>(p.batch);
  };
  const float step = 1e-2f;
  std::size_t checked = 0;
  for (std::size_t k = 0; k < p.params.size(); ++k) {
    std::vector<float> plus = p.params;
    std::vector<float> minus = p.params;
    plus[k] += step;
    minus[k] -= step;
    const double numeric = (mean_loss(plus) - mean_loss(minus)) / (2.0 * step);
    EXPECT_NEAR(grads[k], numeric, 2e-3 + 2e-2 * std::abs(numeric)) << "parameter " << k;
    ++checked;
  }
  EXPECT_EQ(checked, ParamLayout(p.shape).total());
}

TEST(Model, LayersReportReadyFromLastToFirst) {
  Problem p = make_problem();
  CpuMlp model(p.shape, p.batch);
  std::vector<float> grads(p.params.size());
  std::vector<std::size_t> order;
  model.forward_backward(p.params, grads, p.inputs, p.labels,
                         [&](std::size_t layer) { order.push_back(layer); });
  EXPECT_EQ(order, (std::vector<std::size_t>{2, 1, 0}));
}

TEST(Model, ForwardBackwardIsBitwiseRepeatable) {
  Problem p = make_problem();
  CpuMlp a(p.shape, p.batch);
  CpuMlp b(p.shape, p.batch);
  std::vector<float> ga(p.params.size());
  std::vector<float> gb(p.params.size());
  const double la = a.forward_backward(p.params, ga, p.inputs, p.labels, {}).loss_sum;
  const double lb = b.forward_backward(p.params, gb, p.inputs, p.labels, {}).loss_sum;
  EXPECT_EQ(la, lb);
  EXPECT_EQ(ga, gb);
}

TEST(Model, SoftmaxRegressionHasNoHiddenLayer) {
  const MlpShape shape{{6, 3}};
  EXPECT_EQ(shape.layers(), 1u);
  EXPECT_EQ(ParamLayout(shape).total(), 21u);
  EXPECT_EQ(shape.describe(), "6-3");
}

TEST(Dataset, SamplesArePureFunctionsOfSeedAndIndex) {
  const SyntheticDataset a({11, 50, 8, 4});
  const SyntheticDataset b({11, 50, 8, 4});
  const SyntheticDataset other({12, 50, 8, 4});
  std::vector<float> xa(8), xb(8), xo(8);
  EXPECT_EQ(a.sample(17, xa), b.sample(17, xb));
  EXPECT_EQ(xa, xb);
  other.sample(17, xo);
  EXPECT_NE(xa, xo);
}

TEST(Dataset, LabelsUseEveryClass) {
  const SyntheticDataset data({5, 400, 8, 4});
  std::vector<int> seen(4, 0);
  std::vector<float> x(8);
  for (std::uint64_t i = 0; i < 400; ++i) ++seen[static_cast<std::size_t>(data.sample(i, x))];
  for (int count : seen) EXPECT_GT(count, 40);
}

TEST(Optimizer, SgdWithoutMomentumIsPlainDescent) {
  OptimizerConfig config;
  config.kind = OptimizerKind::kSgd;
  config.learning_rate = 0.5;
  config.momentum = 0;
  OptimizerState state = make_optimizer_state(config, 2);
  std::vector<float> params = {1.0f, -2.0f};
  const std::vector<float> grads = {0.5f, 1.0f};
  optimizer_step(config, state, params, grads);
  EXPECT_FLOAT_EQ(params[0], 0.75f);
  EXPECT_FLOAT_EQ(params[1], -2.5f);
  EXPECT_EQ(state.steps, 1u);
}

TEST(Optimizer, SgdMomentumStartsWithTheGradient) {
  OptimizerConfig config;
  config.kind = OptimizerKind::kSgd;
  config.learning_rate = 1.0;
  config.momentum = 0.5;
  OptimizerState state = make_optimizer_state(config, 1);
  std::vector<float> params = {0.0f};
  const std::vector<float> grads = {1.0f};
  optimizer_step(config, state, params, grads);
  EXPECT_FLOAT_EQ(params[0], -1.0f);
  optimizer_step(config, state, params, grads);
  EXPECT_FLOAT_EQ(params[0], -2.5f);  // buffer 0.5*1 + 1
}

TEST(Optimizer, AdamFirstStepMovesByLearningRate) {
  OptimizerConfig config;
  config.kind = OptimizerKind::kAdam;
  config.learning_rate = 0.01;
  OptimizerState state = make_optimizer_state(config, 2);
  std::vector<float> params = {1.0f, 1.0f};
  const std::vector<float> grads = {3.0f, -0.001f};
  optimizer_step(config, state, params, grads);
  // After bias correction m/sqrt(v) = sign(g) on the first step.
  EXPECT_NEAR(params[0], 0.99f, 1e-6);
  EXPECT_NEAR(params[1], 1.01f, 1e-5);
}

}  // namespace
}  // namespace dtrain::trainer
