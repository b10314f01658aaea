// Continuous outputs (IoU, later RoIAlign, losses, decoded boxes): bound-normalized error.
//
// tau(tier) = bound(tier) + half an ulp of the output dtype at the oracle value, where
// bound(tier) is the oracle's running error bound for arithmetic in that tier's type plus
// the oracle's own fp64 error. The strict tier is PyTorch's accumulate type (fp32 for
// fp16/bf16): within it is `ok`. Beyond it but within the storage-dtype tier is
// `precision` (the kernel rounds in the low type). Beyond both is `mismatch`, unless the
// true intermediates leave the accumulate type's range (`overflow`, a range hazard).
// NaN/Inf where the true value is finite and every intermediate is in range is `nan`.
#pragma once

#include <vector>

#include "model/dtype.h"

#include "fuzz/compare/contract.h"
#include "fuzz/compare/verdict.h"

namespace detfuzz::compare {

struct ExpectedValue {
  double value = 0;          // the oracle's value
  bool undefined = false;    // no true value exists (0/0): any output is accepted
  double strict_bound = 0;   // allowed kernel error, accumulate-type arithmetic
  double storage_bound = 0;  // allowed kernel error, storage-dtype arithmetic
  bool range_ok = true;      // intermediates within the accumulate type's range
};

// Shape/dtype/device first (a contract breach ends the comparison), then each element.
// Reports one verdict per finding kind, naming its worst element. max_normalized_error
// covers the elements whose intermediates are in range.
// `input_dtype` names the tiers in messages (its accumulate type and itself).
Judgement compare_continuous(const HostTensor& output, const std::vector<ExpectedValue>& expected,
                             const OutputContract& contract, DType input_dtype);

}  // namespace detfuzz::compare
