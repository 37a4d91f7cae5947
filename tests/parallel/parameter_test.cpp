// Parameter: full values behind an availability gate; reads while unavailable name the parameter
// and the reason.
#include "meshtrain/parallel/parameter.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "meshtrain/core/error.h"
#include "tests/parallel/toy_model.h"

namespace meshtrain {
namespace {

using ::testing::HasSubstr;
using testing::error_message;

TEST(Parameter, BasicProperties) {
  Parameter w("h.0.attn.w", {4, 6});
  EXPECT_EQ(w.name(), "h.0.attn.w");
  EXPECT_EQ(w.shape(), (Shape{4, 6}));
  EXPECT_EQ(w.numel(), 24);
  EXPECT_EQ(w.dtype(), DType::f32);
  EXPECT_TRUE(w.requires_grad());
  EXPECT_TRUE(w.available());
  EXPECT_TRUE(w.decays());
  EXPECT_FALSE(Parameter("h.0.ln.g", {6}).decays());
}

TEST(Parameter, ValueAndGradRoundTrip) {
  Parameter w("w", {2, 2});
  Tensor v = Tensor::from_vector(std::vector<float>{1, 2, 3, 4}, {2, 2});
  Tensor g = Tensor::from_vector(std::vector<float>{-1, -2, -3, -4}, {2, 2});
  w.set_value(v);
  w.set_grad(g);
  EXPECT_EQ(w.value().to_vector(), (std::vector<float>{1, 2, 3, 4}));
  EXPECT_EQ(w.grad().to_vector(), (std::vector<float>{-1, -2, -3, -4}));
  EXPECT_EQ(w.value().storage(), v.storage());  // a handle, not a copy
}

TEST(Parameter, ReadWhileUnavailableNamesParameterAndReason) {
  Parameter w("h.3.mlp.fc.w", {2, 2});
  w.set_value(Tensor::zeros({2, 2}));
  w.set_grad(Tensor::zeros({2, 2}));
  w.make_unavailable("sharded by FSDP unit 'block3'");
  EXPECT_FALSE(w.available());

  EXPECT_THROW(w.value(), Error);
  const std::string value_msg = error_message<Error>([&] { w.value(); });
  EXPECT_THAT(value_msg, HasSubstr("'h.3.mlp.fc.w'"));
  EXPECT_THAT(value_msg, HasSubstr("sharded by FSDP unit 'block3'"));

  EXPECT_THROW(w.grad(), Error);
  const std::string grad_msg = error_message<Error>([&] { w.grad(); });
  EXPECT_THAT(grad_msg, HasSubstr("gradient"));
  EXPECT_THAT(grad_msg, HasSubstr("'h.3.mlp.fc.w'"));
  EXPECT_THAT(grad_msg, HasSubstr("sharded by FSDP unit 'block3'"));
}

TEST(Parameter, MakeUnavailableDropsTheHandles) {
  Parameter w("w", {3});
  Tensor v = Tensor::zeros({3});
  w.set_value(v);
  w.set_grad(Tensor::zeros({3}));
  EXPECT_EQ(v.storage().use_count(), 2);
  w.make_unavailable("resharded");
  EXPECT_EQ(v.storage().use_count(), 1);  // the parameter no longer holds the storage
  w.make_available();
  EXPECT_TRUE(w.available());
  // Available again but without tensors: still an error that names the parameter, not garbage.
  EXPECT_THAT(error_message<Error>([&] { w.value(); }), HasSubstr("'w' has no value"));
  EXPECT_THAT(error_message<Error>([&] { w.grad(); }), HasSubstr("'w' has no gradient"));
  w.set_value(Tensor::from_vector(std::vector<float>{7, 8, 9}, {3}));
  EXPECT_EQ(w.value().to_vector(), (std::vector<float>{7, 8, 9}));
}

TEST(Parameter, MakeUnavailableNeedsAReason) {
  Parameter w("w", {3});
  EXPECT_THROW(w.make_unavailable(""), InvalidArgument);
  EXPECT_TRUE(w.available());
}

TEST(Parameter, FrozenParameterWithoutGradSaysSo) {
  Parameter w("wpe", {4, 2});
  w.set_requires_grad(false);
  EXPECT_THAT(error_message<Error>([&] { w.grad(); }), HasSubstr("frozen"));
}

TEST(Parameter, SetValueShapeMismatch) {
  Parameter w("wte", {4, 6});
  EXPECT_THROW(w.set_value(Tensor::zeros({6, 4})), InvalidArgument);
  const std::string msg = error_message<InvalidArgument>([&] { w.set_value(Tensor::zeros({6, 4})); });
  EXPECT_THAT(msg, HasSubstr("'wte'"));
  EXPECT_THAT(msg, HasSubstr("[4, 6]"));  // expected
  EXPECT_THAT(msg, HasSubstr("[6, 4]"));  // got
  const std::string grad_msg =
      error_message<InvalidArgument>([&] { w.set_grad(Tensor::zeros({24})); });
  EXPECT_THAT(grad_msg, HasSubstr("gradient of parameter 'wte'"));
  EXPECT_THAT(grad_msg, HasSubstr("[24]"));
  // Same numel but different shape is still rejected; the old (absent) value is untouched.
  EXPECT_THAT(error_message<Error>([&] { w.value(); }), HasSubstr("no value"));
}

}  // namespace
}  // namespace meshtrain
