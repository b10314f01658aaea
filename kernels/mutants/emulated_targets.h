// Targets written in plain C++, torch-free: a correct one per op (an independent
// implementation: the twin the mutants deviate from, and the tests' measure of false
// alarms) and variants with ONE planted deviation each (the mutant catalog and the tests
// build their mutants from these switches). Arithmetic is emulated per format (Rounding): every
// operation is done in double and rounded to the compute dtype, which is exactly what an
// IEEE kernel in that dtype computes (double rounding is innocuous for +-*/ when
// 53 >= 2p + 2, true for fp32, bf16 and fp16).
#pragma once

#include <string>

#include "kernels/target.h"

namespace detfuzz::kernels {

struct NmsVariant {
  bool greater_equal = false;     // `>=` instead of `>` at the threshold
  bool assumes_sorted = false;    // visits boxes in input order
  bool storage_arithmetic = false;  // areas and IoU in the input dtype (fp16 overflow)
  bool fp16_areas = false;          // areas rounded to fp16 whatever the input dtype
  bool int32_output = false;      // keep indices as int32: a dtype contract breach
  bool reverse_ties = true;       // equal scores visited by decreasing index
  bool unsupported_low_precision = false;  // raises Error{unsupported} for fp16/bf16
  bool throws_on_empty = false;   // raises on 0 boxes
  // Appends a bogus index on every third call: the property re-runs (scaled, permuted
  // input) then disagree with a main call that was right.
  bool corrupt_every_third_call = false;
  // Drops the last kept box when given more than this many boxes (0: never), like a
  // kernel whose second code path above a size threshold is wrong.
  std::size_t wrong_above_count = 0;
};

Target<NmsProblem> emulated_nms(const std::string& name, NmsVariant variant = {},
                                 std::string description = "greedy NMS in plain C++, every step rounded to the accumulate type");

struct BoxIouVariant {
  bool storage_arithmetic = false;  // every step in the input dtype
  bool fp64_output = false;         // dtype leak
  bool transposed = false;          // [M, N] instead of [N, M]
  bool legacy_plus_one_area = false;  // areas as (x2 - x1 + 1)(y2 - y1 + 1), intersection without
  bool corrupt_every_third_call = false;  // shifts the first IoU on every third call
};

Target<BoxIouProblem> emulated_box_iou(const std::string& name, BoxIouVariant variant = {},
                                        std::string description = "box IoU in plain C++, every step rounded to the accumulate type");

struct RoiAlignVariant {
  bool ignores_spatial_scale = false;  // treats spatial_scale as 1.0
  bool ignores_aligned = false;        // never shifts by -0.5
  bool ignores_batch_index = false;    // reads image 0 for every RoI
  // PSRoIAlign: output channel c of bin b reads input channel c * bins + b, always aligned
  // (outputs values and channel_mapping).
  bool position_sensitive = false;
  bool channel_off_by_one = false;     // position-sensitive: reads channel c_in + 1 (mod C)
};

// torchvision's RoIAlign forward, every step rounded to the accumulate type of the dtype.
Target<RoiAlignProblem> emulated_roi_align(const std::string& name, RoiAlignVariant variant = {},
                                            std::string description = "RoIAlign forward in plain C++");

struct RoiAlignBackwardVariant {
  bool position_sensitive = false;     // PSRoIAlign's backward: bin b of channel c lands in c * bins + b
  bool storage_arithmetic = false;     // every step and the accumulation in the storage dtype (torchvision's T)
  bool ignores_spatial_scale = false;  // treats spatial_scale as 1.0
  bool drops_last_corner = false;      // never adds the (y_high, x_high) corner's g4
  bool channel_off_by_one = false;     // scatters into input channel c + 1 (mod C)
};

// torchvision's RoIAlign / PSRoIAlign backward in the kernel's order (RoI, channel, bin,
// sample, corner), every step rounded to the accumulate type (or the storage dtype).
Target<RoiAlignBackwardProblem> emulated_roi_align_backward(const std::string& name, RoiAlignBackwardVariant variant = {},
                                                            std::string description = "RoIAlign backward in plain C++");

struct RoiPoolBackwardVariant {
  bool storage_arithmetic = false;  // the additions in the storage dtype (torchvision's T)
  bool assigns = false;             // `=` for `+=`: where bins share an argmax pixel, the last one wins
  bool channel_off_by_one = false;  // adds into input channel c + 1 (mod C)
};

// torchvision's RoIPool backward in its order (RoI, channel, bin), the additions rounded to
// the accumulate type (or the storage dtype).
Target<RoiPoolBackwardProblem> emulated_roi_pool_backward(const std::string& name, RoiPoolBackwardVariant variant = {},
                                                          std::string description = "RoIPool backward in plain C++");

struct PsRoiPoolVariant {
  bool storage_arithmetic = false;     // every step in the storage dtype (torchvision's T)
  bool ignores_spatial_scale = false;  // treats spatial_scale as 1.0
  bool channel_off_by_one = false;     // bin (ph, pw) reads input channel c_in + 1 (mod C)
  // Clips bin ends to height - 1 and width - 1, as torchvision's forward kernels do (its
  // backward and its test reference clip to height and width).
  bool clips_before_last_pixel = false;
};

// Position-sensitive RoIPool forward (torchvision's bins, R-FCN's mean), every step rounded
// to the accumulate type of the dtype (or the storage dtype); outputs (values, channel_mapping).
Target<RoiPoolProblem> emulated_ps_roi_pool(const std::string& name, PsRoiPoolVariant variant = {},
                                            std::string description = "position-sensitive RoIPool forward in plain C++");
// Its backward in torchvision's order (RoI, bin, output channel): each gradient value divided
// by its bin's area and added to every pixel of the bin, the same switches.
Target<PsRoiPoolBackwardProblem> emulated_ps_roi_pool_backward(const std::string& name, PsRoiPoolVariant variant = {},
                                                               std::string description = "PSRoIPool backward in plain C++");

struct DeformConv2dVariant {
  bool storage_arithmetic = false;  // every step in the storage dtype (torchvision's scalar_t)
  bool swaps_offset_xy = false;     // reads channel 2k as the column offset and 2k + 1 as the row offset
  bool ignores_mask = false;        // use_mask or not, every sample weighs 1 (DCNv1 where v2 was asked)
};

// torchvision's deformable convolution forward (bilinear samples at the offset positions,
// weighted by the mask, summed over the group's channels and taps, plus the bias), every step
// rounded to the accumulate type (or the storage dtype); refuses what the kernel refuses.
Target<DeformConv2dProblem> emulated_deform_conv2d(const std::string& name, DeformConv2dVariant variant = {},
                                                   std::string description = "deform_conv2d forward in plain C++");

// IoU of two boxes computed the canonical way, every step rounded to `compute`.
double emulated_iou(const Box& a, const Box& b, DType compute);

}  // namespace detfuzz::kernels
