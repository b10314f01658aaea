// NMS mutants: the emulated greedy NMS (twin:nms, torchvision semantics: suppress when
// IoU > threshold, accumulate type per dtype, like torchvision's CUDA kernel) with one
// deviation each.
//
//   nms_greater_equal    suppresses at IoU == threshold too (`>=` for `>`): the off-by-one
//                        comparison that makes two libraries disagree on exact-ratio boxes
//   nms_assumes_sorted   visits boxes in input order, trusting the caller to have sorted by
//                        score (kernels that moved the sort into a wrapper)
//   nms_fp16_areas       stores box areas in fp16 whatever the input dtype: a 256 x 256 box
//                        has area 65,536 > fp16's 65,504, the area is inf, the IoU 0 and
//                        nothing is suppressed (AMP-era kernels with half buffers)
//   nms_raises_on_empty  raises on 0 boxes instead of returning an empty keep (images
//                        without detections crash the post-processing)
//   nms_crash_7x3        raises SIGSEGV on a box exactly 7 wide and 3 high, like a kernel
//                        that indexes past a buffer for one box shape (the class of the
//                        torchvision RoIAlign segfaults on odd inputs)
//   nms_hang_5x9         loops forever on a box exactly 5 wide and 9 high, like a kernel
//                        whose loop bound never converges on one input
//   native_nms_reduction_skips_own_block
//                        detfuzz's bitmask NMS (twin: native) whose reduction ORs a kept
//                        box's mask words from the next 64-box block on: suppressions
//                        between boxes of one block are lost (the off-by-one of
//                        `for (j = nblock; j < col_blocks; j++)` in torchvision's nms_kernel.cu)
#include <chrono>
#include <csignal>
#include <thread>

#include "kernels/factories.h"
#include "kernels/mutants/emulated_targets.h"

namespace detfuzz::kernels {
namespace {

bool has_box(const NmsProblem& problem, double width, double height) {
  for (const Box& b : problem.boxes)
    if (b.x2 - b.x1 == width && b.y2 - b.y1 == height) return true;
  return false;
}

Target<NmsProblem> variant(const std::string& name, NmsVariant flaw, const std::string& description) {
  return emulated_nms("mutant:" + name, flaw, description);
}

template <class Member>
NmsVariant with(Member member) {
  NmsVariant v;
  v.*member = true;
  return v;
}

// A twin whose run first passes the problem to `trap` (which may crash or never return).
Target<NmsProblem> trapped(const std::string& name, const std::string& description,
                           std::function<void(const NmsProblem&)> trap) {
  return deviating<NmsProblem>(emulated_nms("twin:nms"), "mutant:" + name, description,
                               [trap](const Target<NmsProblem>& twin, const NmsProblem& p, DType dtype, Device device) {
                                 trap(p);
                                 return twin.run(p, dtype, device);
                               });
}

}  // namespace

std::vector<Target<NmsProblem>> nms_mutants() {
  return {
      emulated_nms("twin:nms", {},
                   "correct twin of the NMS mutants: greedy NMS in plain C++, IoU > threshold, every step "
                   "rounded to the dtype's accumulate type"),
      variant("nms_greater_equal", with(&NmsVariant::greater_equal),
              "greedy NMS that suppresses at IoU == threshold too (>= instead of >)"),
      variant("nms_assumes_sorted", with(&NmsVariant::assumes_sorted),
              "greedy NMS that visits boxes in input order, assuming they are sorted by score"),
      variant("nms_fp16_areas", with(&NmsVariant::fp16_areas),
              "greedy NMS that stores box areas in fp16 (overflow above 65,504: IoU 0, nothing suppressed)"),
      variant("nms_raises_on_empty", with(&NmsVariant::throws_on_empty), "greedy NMS that raises on 0 boxes"),
      trapped("nms_crash_7x3", "greedy NMS that raises SIGSEGV on a box exactly 7 wide and 3 high",
              [](const NmsProblem& p) {
                if (has_box(p, 7, 3)) std::raise(SIGSEGV);
              }),
      trapped("nms_hang_5x9", "greedy NMS that never returns on a box exactly 5 wide and 9 high",
              [](const NmsProblem& p) {
                while (has_box(p, 5, 9)) std::this_thread::sleep_for(std::chrono::seconds(1));
              }),
      renamed(native_nms_target(NativeNmsReduction::from_next_block), "mutant:native_nms_reduction_skips_own_block",
              "detfuzz's bitmask NMS whose reduction starts one 64-box block late (host emulation on cpu, the "
              "CUDA kernel's masks on cuda)"),
  };
}

}  // namespace detfuzz::kernels
