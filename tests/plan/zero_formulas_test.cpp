// The ZeRO paper's Table 1 (Rajbhandari et al. 2020, arXiv:1910.02054): per-device model-state
// memory of P_os, P_os+g and P_os+g+p for Ψ = 7.5B, 128B and 1T parameters at DP degrees 1 to
// 1024, K = 12, in GB of 1e9 bytes: every cell's exact value (the paper prints them rounded; only
// the 7.5B row at Nd = 64 is quoted here as printed, the rest computed from the closed forms).
#include "meshtrain/plan/zero_formulas.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <string>

#include "meshtrain/core/error.h"

namespace meshtrain {
namespace {

struct Cell {
  double psi;
  int nd;
  ZeroStage stage;
  double gb;  // the closed form's exact value; the paper prints it rounded
};

constexpr double k7_5B = 7.5e9, k128B = 128e9, k1T = 1e12;
constexpr ZeroStage kOs = ZeroStage::os, kOsG = ZeroStage::os_g, kOsGP = ZeroStage::os_g_p;

// The cells of Table 1 (DP degree, then P_os, P_os+g, P_os+g+p for each model size) as exact
// values: each is a dyadic fraction of a GB, so the formula must give it to the last bit.
const Cell kTable1[] = {
    // 7.5B model
    {k7_5B, 1, kOs, 120},
    {k7_5B, 1, kOsG, 120},
    {k7_5B, 1, kOsGP, 120},
    {k7_5B, 4, kOs, 52.5},
    {k7_5B, 4, kOsG, 41.25},
    {k7_5B, 4, kOsGP, 30},
    {k7_5B, 16, kOs, 35.625},
    {k7_5B, 16, kOsG, 21.5625},
    {k7_5B, 16, kOsGP, 7.5},
    {k7_5B, 64, kOs, 31.40625},
    {k7_5B, 64, kOsG, 16.640625},
    {k7_5B, 64, kOsGP, 1.875},
    {k7_5B, 256, kOs, 30.3515625},
    {k7_5B, 256, kOsG, 15.41015625},
    {k7_5B, 256, kOsGP, 0.46875},
    {k7_5B, 1024, kOs, 30.087890625},
    {k7_5B, 1024, kOsG, 15.1025390625},
    {k7_5B, 1024, kOsGP, 0.1171875},
    // 128B model
    {k128B, 1, kOs, 2048},
    {k128B, 1, kOsG, 2048},
    {k128B, 1, kOsGP, 2048},
    {k128B, 4, kOs, 896},
    {k128B, 4, kOsG, 704},
    {k128B, 4, kOsGP, 512},
    {k128B, 16, kOs, 608},
    {k128B, 16, kOsG, 368},
    {k128B, 16, kOsGP, 128},
    {k128B, 64, kOs, 536},
    {k128B, 64, kOsG, 284},
    {k128B, 64, kOsGP, 32},
    {k128B, 256, kOs, 518},
    {k128B, 256, kOsG, 263},
    {k128B, 256, kOsGP, 8},
    {k128B, 1024, kOs, 513.5},
    {k128B, 1024, kOsG, 257.75},
    {k128B, 1024, kOsGP, 2},
    // 1T model
    {k1T, 1, kOs, 16000},
    {k1T, 1, kOsG, 16000},
    {k1T, 1, kOsGP, 16000},
    {k1T, 4, kOs, 7000},
    {k1T, 4, kOsG, 5500},
    {k1T, 4, kOsGP, 4000},
    {k1T, 16, kOs, 4750},
    {k1T, 16, kOsG, 2875},
    {k1T, 16, kOsGP, 1000},
    {k1T, 64, kOs, 4187.5},
    {k1T, 64, kOsG, 2218.75},
    {k1T, 64, kOsGP, 250},
    {k1T, 256, kOs, 4046.875},
    {k1T, 256, kOsG, 2054.6875},
    {k1T, 256, kOsGP, 62.5},
    {k1T, 1024, kOs, 4011.71875},
    {k1T, 1024, kOsG, 2013.671875},
    {k1T, 1024, kOsGP, 15.625},
};

TEST(ZeroTable1, EveryCell) {
  for (const Cell& c : kTable1)
    EXPECT_EQ(zero_model_state_bytes(c.stage, c.psi, c.nd), c.gb * 1e9)
        << zero_stage_name(c.stage) << " for Ψ = " << c.psi << " at Nd = " << c.nd;
}

// The example of the paper's Figure 1 and section 5, as it prints it: Ψ = 7.5B, Nd = 64, K = 12
// gives 120, 31.4, 16.6 and 1.88 GB.
TEST(ZeroTable1, TheSevenAndAHalfBillionExampleAtSixtyFour) {
  const double psi = 7.5e9;
  const auto printed = [&](ZeroStage stage, int decimals) {
    char text[32];
    std::snprintf(text, sizeof text, "%.*f", decimals,
                  zero_model_state_bytes(stage, psi, 64) / 1e9);
    return std::string(text);
  };
  EXPECT_EQ(printed(ZeroStage::dp, 0), "120");
  EXPECT_EQ(printed(ZeroStage::os, 1), "31.4");
  EXPECT_EQ(printed(ZeroStage::os_g, 1), "16.6");
  EXPECT_EQ(printed(ZeroStage::os_g_p, 2), "1.88");
}

// The baseline does not depend on Nd, and one rank shards nothing: every stage is DP's 16 Ψ.
TEST(ZeroFormulas, DataParallelismAndOneRank) {
  for (const double nd : {1.0, 4.0, 1024.0})
    EXPECT_EQ(zero_model_state_bytes(ZeroStage::dp, 1e9, nd), 16e9);
  for (const ZeroStage s : {ZeroStage::os, ZeroStage::os_g, ZeroStage::os_g_p})
    EXPECT_EQ(zero_model_state_bytes(s, 1e9, 1), 16e9) << zero_stage_name(s);
  EXPECT_EQ(zero_model_state_bytes(ZeroStage::os_g_p, 1e9, 8, /*k=*/4), 1e9);
}

TEST(ZeroFormulas, RefusesNonsense) {
  EXPECT_THROW(zero_model_state_bytes(ZeroStage::os, -1, 4), InvalidArgument);
  EXPECT_THROW(zero_model_state_bytes(ZeroStage::os, 1e9, 0), InvalidArgument);
  EXPECT_THROW(zero_model_state_bytes(ZeroStage::os, 1e9, 4, -12), InvalidArgument);
}

}  // namespace
}  // namespace meshtrain
