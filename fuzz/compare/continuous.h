// Continuous outputs (IoU, later RoIAlign, losses, decoded boxes): bound-normalized error.
//
// tau(tier) = bound(tier) + half an ulp of the output dtype at the oracle value, where
// bound(tier) is the oracle's running error bound for arithmetic in that tier's type plus
// the oracle's own fp64 error. The strict tier is PyTorch's accumulate type (fp32 for
// fp16/bf16): within it is `ok`. Beyond it but within the storage-dtype tier is
// `precision` (the kernel rounds in the low type). Beyond both is `mismatch`, unless the
// true intermediates leave the accumulate type's range (`overflow`, a range hazard).
// Range is judged in the dtype the kernel really computes each intermediate in: where the
// target's declared arithmetic computes one in a narrower dtype that it overflows, the
// finding is `dtype_overflow`, named with the intermediate. NaN/Inf where the true value is
// finite and no intermediate leaves its range is `nan`.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "model/dtype.h"
#include "oracles/loss_gradients.h"
#include "oracles/running_error.h"

#include "fuzz/compare/contract.h"
#include "fuzz/compare/verdict.h"

namespace detfuzz::compare {

// What one tier accepts: any exact value in [low, high] (a point unless the oracle found
// decisions that tier's rounding may flip) plus `bound` of rounding error.
struct TierExpectation {
  double low = 0, high = 0;
  double bound = 0;
};

struct ExpectedValue {
  double value = 0;          // the oracle's value
  bool undefined = false;    // no true value exists (0/0): any output is accepted
  TierExpectation strict;    // accumulate-type arithmetic
  TierExpectation storage;   // storage-dtype arithmetic
  bool range_ok = true;      // intermediates within the accumulate type's range

  // A point expectation: exactly `value`, up to each tier's bound.
  static ExpectedValue point(double value, double strict_bound, double storage_bound, bool range_ok,
                             bool undefined = false) {
    return {value, undefined, {value, value, strict_bound}, {value, value, storage_bound}, range_ok};
  }
};

// An intermediate whose true value leaves the range of the dtype the kernel computes it in.
struct StageOverflow {
  std::string stage;   // what it is, as the kernel's code names it: "rb - lt (intersection width)"
  double value = 0;    // its exact value (fp64 on the rounded inputs)
  // The farthest from zero the kernel's value of it may be, given its rounding error in
  // `dtype` (equal to `value` when it overflows exactly).
  double reach = 0;
  DType dtype = DType::fp32;  // the dtype the target computes it in
  std::string source;  // where the target's code does so (file, version)
};

// For an element the kernel got wrong (non-finite or beyond both tiers): the intermediate
// that the target's own arithmetic overflows, if any. Asked only for such elements.
using OverflowExplainer = std::function<std::optional<StageOverflow>(std::size_t element)>;

// The expectation for an oracle value whose first-order bound is widened by `safety` (for
// reorderings and second-order terms): the accumulate type's tier and the dtype's tier.
ExpectedValue expected_from(const oracles::OracleValue& value, DType dtype, double safety, bool hostile = false);
// The expectation for one element of an analytic gradient: its tiers' intervals and bounds.
ExpectedValue expected_from(const oracles::GradientElement& gradient);

// What a tier allows beyond its interval in an output of `output_dtype`: its bound plus half
// an ulp at the interval's ends. The one tolerance that verdicts, reports and replays print.
double tolerance(const TierExpectation& tier, DType output_dtype);

// The strict tier's tolerance per element (infinite where nothing is expected): the
// tolerance column people read in a replay. `output_dtype` is the output contract's dtype.
std::vector<double> strict_tolerances(const std::vector<ExpectedValue>& expected, DType output_dtype);

// How a kernel value reads in a message: "NaN", "+inf", "-inf" or the number.
std::string value_text(double value);

// Shape/dtype/device first (a contract breach ends the comparison), then each element.
// Reports one verdict per finding kind, naming its worst element. max_normalized_error
// covers the elements whose intermediates are in range.
// `input_dtype` names the tiers in messages (its accumulate type and itself).
// `explain` (may be empty) names the intermediate a target's own arithmetic overflows.
Judgement compare_continuous(const HostTensor& output, const std::vector<ExpectedValue>& expected,
                             const OutputContract& contract, DType input_dtype,
                             const OverflowExplainer& explain = {});

}  // namespace detfuzz::compare
