// The HTML report: one self-contained file (inline CSS and SVG drawn here, no script, no
// network) that people read after a nightly run. A summary table of cells; per cell the
// distribution of normalized error and error against input magnitude; per finding a
// picture of its minimal case (NMS: the boxes to scale, kept / suppressed / wrongly kept /
// wrongly suppressed in different colours; box pairs: the two sets; RoIAlign and RoIPool:
// the feature map, the RoI and its bins, the sampling points of the failing bin), the
// oracle's and the kernel's values, and the replay command.
#pragma once

#include <string>

#include "reports/report.h"

namespace detfuzz::reports {

std::string html_report(const Report& report);

}  // namespace detfuzz::reports
