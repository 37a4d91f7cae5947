// AdamW hyper-parameters (PyTorch defaults except beta2 = 0.95, as in GPT-2 training recipes).
#pragma once

namespace meshtrain::ops {

struct AdamWHyper {
  float lr = 3e-4f;
  float beta1 = 0.9f;
  float beta2 = 0.95f;
  float eps = 1e-8f;
  float weight_decay = 0.0f;
};

}  // namespace meshtrain::ops
