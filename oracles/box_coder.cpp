#include "box_coder.h"

#include <cmath>

#include "running_error.h"

namespace detfuzz::oracles {
namespace {


void decode(const BoxCoderProblem& p, std::size_t i, std::vector<OracleValue>& out) {
  ErrorTracker t;
  const Box& b = p.boxes[i];
  const Tracked half = t.input(0.5);
  const Tracked x1 = t.input(b.x1), y1 = t.input(b.y1), x2 = t.input(b.x2), y2 = t.input(b.y2);
  const Tracked widths = t.sub(x2, x1), heights = t.sub(y2, y1);
  const Tracked ctr_x = t.add(x1, t.mul(half, widths)), ctr_y = t.add(y1, t.mul(half, heights));
  const auto& d = p.deltas[i];
  const Tracked dx = t.div(t.input(d[0]), t.input(p.weights[0]));
  const Tracked dy = t.div(t.input(d[1]), t.input(p.weights[1]));
  const Tracked clip = t.input(p.clip);
  const Tracked dw = t.min(t.div(t.input(d[2]), t.input(p.weights[2])), clip);
  const Tracked dh = t.min(t.div(t.input(d[3]), t.input(p.weights[3])), clip);
  const Tracked pred_ctr_x = t.add(t.mul(dx, widths), ctr_x);
  const Tracked pred_ctr_y = t.add(t.mul(dy, heights), ctr_y);
  const Tracked c_to_c_w = t.mul(half, t.mul(t.exp(dw), widths));
  const Tracked c_to_c_h = t.mul(half, t.mul(t.exp(dh), heights));
  const Tracked corners[4] = {t.sub(pred_ctr_x, c_to_c_w), t.sub(pred_ctr_y, c_to_c_h), t.add(pred_ctr_x, c_to_c_w),
                              t.add(pred_ctr_y, c_to_c_h)};
  for (const Tracked& corner : corners) out.push_back(t.result(corner));
}

void encode(const BoxCoderProblem& p, std::size_t i, std::vector<OracleValue>& out) {
  ErrorTracker t;
  const Box& e = p.boxes[i];
  const Box& g = p.references[i];
  const Tracked half = t.input(0.5);
  const Tracked ex_w = t.sub(t.input(e.x2), t.input(e.x1)), ex_h = t.sub(t.input(e.y2), t.input(e.y1));
  const Tracked ex_cx = t.add(t.input(e.x1), t.mul(half, ex_w)), ex_cy = t.add(t.input(e.y1), t.mul(half, ex_h));
  const Tracked gt_w = t.sub(t.input(g.x2), t.input(g.x1)), gt_h = t.sub(t.input(g.y2), t.input(g.y1));
  const Tracked gt_cx = t.add(t.input(g.x1), t.mul(half, gt_w)), gt_cy = t.add(t.input(g.y1), t.mul(half, gt_h));
  const bool undefined = !(ex_w.value > 0 && ex_h.value > 0 && gt_w.value > 0 && gt_h.value > 0);
  const Tracked deltas[4] = {
      t.div(t.mul(t.input(p.weights[0]), t.sub(gt_cx, ex_cx)), ex_w),
      t.div(t.mul(t.input(p.weights[1]), t.sub(gt_cy, ex_cy)), ex_h),
      t.mul(t.input(p.weights[2]), t.log(t.div(gt_w, ex_w))),
      t.mul(t.input(p.weights[3]), t.log(t.div(gt_h, ex_h))),
  };
  for (const Tracked& delta : deltas) out.push_back(t.result(delta, undefined));
}

}  // namespace

std::vector<OracleValue> box_coder(const BoxCoderProblem& problem) {
  std::vector<OracleValue> out;
  out.reserve(problem.boxes.size() * 4);
  for (std::size_t i = 0; i < problem.boxes.size(); ++i) {
    if (problem.mode == BoxCoderProblem::Mode::decode) decode(problem, i, out);
    else encode(problem, i, out);
  }
  return out;
}

}  // namespace detfuzz::oracles
