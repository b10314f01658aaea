// torchvision::nms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor, called boxed.
#include "dispatch.h"
#include "kernels/tensor_convert.h"
#include "model/error.h"

namespace detfuzz::kernels {

Target<NmsProblem> torchvision_nms_target(const KernelConfig& config) {
  Target<NmsProblem> target;
  target.name = "torchvision";
  target.description = "torchvision::nms from the loaded torchvision op library (dispatcher, boxed)";
  target.availability = [config](Device device) -> Availability {
    const LibraryStatus& library = load_torchvision(config);
    if (!library.loaded) return {false, library.error};
    return op_availability("torchvision::nms", device);
  };
  target.run = [config](const NmsProblem& problem, DType dtype, Device device) {
    const LibraryStatus& library = load_torchvision(config);
    if (!library.loaded) throw Error(ErrorKind::unavailable, library.error);
    auto op = find_op("torchvision::nms");
    if (!op) throw Error(ErrorKind::unavailable, "torchvision::nms is not registered by " + library.path);
    std::vector<c10::IValue> args{boxes_tensor(problem.boxes, dtype, device),
                                  values_tensor(problem.scores, dtype, device),
                                  problem.iou_threshold};
    auto outputs = call_boxed(*op, std::move(args));
    return std::vector<HostTensor>{to_host(outputs.at(0).toTensor())};
  };
  return target;
}

}  // namespace detfuzz::kernels
