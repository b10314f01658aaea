#include "reports/html.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <set>

#include "reports/render.h"

namespace detfuzz::reports {
namespace {

constexpr const char* kStyle = R"(
body { font: 14px/1.4 system-ui, sans-serif; margin: 2em; color: #222; }
table { border-collapse: collapse; margin: 1em 0; }
th, td { border: 1px solid #ccc; padding: 2px 8px; text-align: left; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
.failed { color: #b00; font-weight: bold; } .ok { color: #070; } .unsupported { color: #888; }
section.cell, section.finding { border-top: 1px solid #ddd; padding-top: 0.5em; margin-top: 1em; }
svg { background: #fafafa; border: 1px solid #ddd; margin-right: 1em; }
code, pre { background: #f4f4f4; padding: 2px 4px; }
pre { overflow-x: auto; max-height: 20em; }
.legend span { display: inline-block; margin-right: 1em; }
.swatch { display: inline-block; width: 0.9em; height: 0.9em; vertical-align: middle; margin-right: 0.3em; }
)";

std::string number(double value) {
  if (std::isnan(value)) return "nan";
  if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
  return fmt::format("{:.6g}", value);
}

std::string json_scalar(const nlohmann::json& value) {
  if (value.is_number()) return number(value.get<double>());
  if (value.is_string()) return value.get<std::string>();
  return value.dump();
}

// World coordinates [x0, x1] x [y0, y1] onto a width x height SVG with a margin; y grows
// downwards in both (image coordinates).
struct Frame {
  double x0, y0, x1, y1, width, height, margin = 12;
  double scale() const {
    return std::min((width - 2 * margin) / std::max(x1 - x0, 1e-300), (height - 2 * margin) / std::max(y1 - y0, 1e-300));
  }
  double x(double wx) const { return margin + (wx - x0) * scale(); }
  double y(double wy) const { return margin + (wy - y0) * scale(); }
};

std::string rect(const Frame& f, double x1, double y1, double x2, double y2, const std::string& style,
                 const std::string& title) {
  const double left = f.x(std::min(x1, x2)), top = f.y(std::min(y1, y2));
  const double w = std::max(std::fabs(x2 - x1) * f.scale(), 0.5), h = std::max(std::fabs(y2 - y1) * f.scale(), 0.5);
  return fmt::format("<rect x=\"{:.2f}\" y=\"{:.2f}\" width=\"{:.2f}\" height=\"{:.2f}\" style=\"{}\"><title>{}</title></rect>\n",
                     left, top, w, h, style, markup_escaped(title));
}

bool finite_box(const nlohmann::json& box) {
  if (!box.is_array() || box.size() < 4) return false;
  for (const auto& v : box)
    if (!v.is_number() || !std::isfinite(v.get<double>())) return false;
  return true;
}

// The coordinates of a box row: [x1, y1, x2, y2] or, for RoIs, [batch, x1, y1, x2, y2].
std::array<double, 4> corners(const nlohmann::json& box, std::size_t offset = 0) {
  return {box[offset].get<double>(), box[offset + 1].get<double>(), box[offset + 2].get<double>(),
          box[offset + 3].get<double>()};
}

Frame frame_around(const std::vector<std::array<double, 4>>& boxes, double width, double height) {
  Frame f{0, 0, 1, 1, width, height};
  if (boxes.empty()) return f;
  f.x0 = f.y0 = INFINITY;
  f.x1 = f.y1 = -INFINITY;
  for (const auto& b : boxes) {
    f.x0 = std::min({f.x0, b[0], b[2]});
    f.x1 = std::max({f.x1, b[0], b[2]});
    f.y0 = std::min({f.y0, b[1], b[3]});
    f.y1 = std::max({f.y1, b[1], b[3]});
  }
  const double pad = 0.05 * std::max({f.x1 - f.x0, f.y1 - f.y0, 1e-9});
  f.x0 -= pad;
  f.y0 -= pad;
  f.x1 += pad;
  f.y1 += pad;
  return f;
}

std::string svg_open(const std::string& css_class, double width, double height) {
  return fmt::format("<svg class=\"{}\" width=\"{:.0f}\" height=\"{:.0f}\" viewBox=\"0 0 {:.0f} {:.0f}\">\n", css_class,
                     width, height, width, height);
}

std::string legend(const std::vector<std::pair<std::string, std::string>>& entries) {
  std::string html = "<div class=\"legend\">";
  for (const auto& [colour, label] : entries)
    html += fmt::format("<span><span class=\"swatch\" style=\"background:{}\"></span>{}</span>", colour, label);
  return html + "</div>\n";
}

// NMS and batched NMS: every box, coloured by what the oracle and the kernel kept.
std::string nms_picture(const nlohmann::json& input, const nlohmann::json& details) {
  const auto& boxes = input.at("boxes");
  std::set<long long> oracle, kernel;
  const bool have_keeps = details.contains("oracle_keep") && details.contains("kernel_keep");
  if (have_keeps) {
    for (const auto& i : details.at("oracle_keep")) oracle.insert(i.get<long long>());
    for (const auto& i : details.at("kernel_keep")) kernel.insert(i.get<long long>());
  }
  std::vector<std::array<double, 4>> drawn;
  std::size_t not_drawn = 0;
  for (const auto& b : boxes) finite_box(b) ? drawn.push_back(corners(b)) : void(++not_drawn);
  const Frame f = frame_around(drawn, 420, 320);
  std::string svg = svg_open("boxes nms", f.width, f.height);
  // Suppressed first, so the boxes that matter are drawn on top.
  for (int pass = 0; pass < 2; ++pass)
    for (std::size_t i = 0; i < boxes.size(); ++i) {
      if (!finite_box(boxes[i])) continue;
      const bool in_oracle = oracle.count(static_cast<long long>(i)) > 0, in_kernel = kernel.count(static_cast<long long>(i)) > 0;
      const bool agree = in_oracle == in_kernel;
      if ((pass == 0) != (agree && !in_oracle)) continue;
      std::string colour = !have_keeps ? "#555" : agree ? (in_oracle ? "#2a2" : "#aaa") : (in_kernel ? "#d00" : "#e80");
      std::string what = !have_keeps ? "" : agree ? (in_oracle ? "kept" : "suppressed") : (in_kernel ? "wrongly kept" : "wrongly suppressed");
      const auto c = corners(boxes[i]);
      std::string score = input.contains("scores") && i < input.at("scores").size() ? json_scalar(input.at("scores")[i]) : "";
      svg += rect(f, c[0], c[1], c[2], c[3],
                  fmt::format("fill:{};fill-opacity:0.12;stroke:{};stroke-width:{}", colour, colour, agree ? 1 : 2.5),
                  fmt::format("box {} [{}, {}, {}, {}] score {} {}", i, number(c[0]), number(c[1]), number(c[2]),
                              number(c[3]), score, what));
    }
  svg += "</svg>\n";
  std::string html = svg;
  if (have_keeps)
    html += legend({{"#2a2", "kept"}, {"#aaa", "suppressed"}, {"#d00", "wrongly kept"}, {"#e80", "wrongly suppressed"}});
  if (not_drawn) html += fmt::format("<p>{} box(es) with NaN or infinite coordinates not drawn.</p>\n", not_drawn);
  return html;
}

// Two box sets (IoU, GIoU, losses over pairs): the element's pair drawn thick.
std::string box_pairs_picture(const nlohmann::json& input, const nlohmann::json& details) {
  const auto& first = input.at("boxes1");
  const auto& second = input.at("boxes2");
  long long row = -1, column = -1;
  if (details.contains("element") && details.at("element").size() == 2) {
    row = details.at("element")[0].get<long long>();
    column = details.at("element")[1].get<long long>();
  }
  std::vector<std::array<double, 4>> drawn;
  for (const auto* set : {&first, &second})
    for (const auto& b : *set)
      if (finite_box(b)) drawn.push_back(corners(b));
  const Frame f = frame_around(drawn, 420, 320);
  std::string svg = svg_open("boxes pairs", f.width, f.height);
  for (int s = 0; s < 2; ++s) {
    const auto& set = s == 0 ? first : second;
    const std::string colour = s == 0 ? "#15c" : "#a3c";
    for (std::size_t i = 0; i < set.size(); ++i) {
      if (!finite_box(set[i])) continue;
      const bool chosen = static_cast<long long>(i) == (s == 0 ? row : column);
      const auto c = corners(set[i]);
      svg += rect(f, c[0], c[1], c[2], c[3],
                  fmt::format("fill:{};fill-opacity:0.1;stroke:{};stroke-width:{}", colour, colour, chosen ? 3 : 1),
                  fmt::format("boxes{}[{}] = [{}, {}, {}, {}]", s + 1, i, number(c[0]), number(c[1]), number(c[2]),
                              number(c[3])));
    }
  }
  return svg + "</svg>\n" + legend({{"#15c", "boxes1"}, {"#a3c", "boxes2 (the element's pair drawn thick)"}});
}

// RoIAlign / RoIPool: the feature map's pixel grid, the RoI in feature coordinates with its
// bins, and (RoIAlign) the sampling points of the failing element's bin.
std::string roi_picture(const nlohmann::json& input, const nlohmann::json& details, bool align) {
  const auto& shape = input.at("input").at("shape");
  const double height = shape.at(2).get<double>(), width = shape.at(3).get<double>();
  const double scale = input.at("spatial_scale").get<double>();
  const bool aligned = align && input.value("aligned", false);
  const double offset = aligned ? 0.5 : 0.0;
  const auto pooled_h = input.at("pooled_height").get<long long>(), pooled_w = input.at("pooled_width").get<long long>();
  std::vector<long long> element;
  if (details.contains("element"))
    for (const auto& e : details.at("element")) element.push_back(e.get<long long>());
  const auto& rois = input.at("rois");
  const std::size_t k = element.size() == 4 && element[0] >= 0 ? static_cast<std::size_t>(element[0]) : 0;
  std::vector<std::array<double, 4>> extent{{0, 0, width, height}};
  std::array<double, 4> roi{};
  const bool have_roi = k < rois.size() && rois[k].size() >= 5 && std::all_of(rois[k].begin(), rois[k].end(), [](const auto& v) {
                          return v.is_number() && std::isfinite(v.template get<double>());
                        });
  if (have_roi) {
    const auto c = corners(rois[k], 1);
    roi = {c[0] * scale - offset, c[1] * scale - offset, c[2] * scale - offset, c[3] * scale - offset};
    if (!align) roi = {std::round(c[0] * scale), std::round(c[1] * scale), std::round(c[2] * scale), std::round(c[3] * scale)};
    extent.push_back(roi);
  }
  const Frame f = frame_around(extent, 420, 320);
  std::string svg = svg_open(align ? "roi roi-align" : "roi roi-pool", f.width, f.height);
  svg += rect(f, 0, 0, width, height, "fill:#eef;stroke:#99b", fmt::format("feature map {} x {}", height, width));
  if (height * width <= 64 * 64 && f.scale() >= 3) {
    for (double x = 1; x < width; ++x)
      svg += fmt::format("<line x1=\"{:.2f}\" y1=\"{:.2f}\" x2=\"{:.2f}\" y2=\"{:.2f}\" stroke=\"#ccd\"/>\n", f.x(x), f.y(0), f.x(x), f.y(height));
    for (double y = 1; y < height; ++y)
      svg += fmt::format("<line x1=\"{:.2f}\" y1=\"{:.2f}\" x2=\"{:.2f}\" y2=\"{:.2f}\" stroke=\"#ccd\"/>\n", f.x(0), f.y(y), f.x(width), f.y(y));
  }
  if (have_roi) {
    double roi_w = roi[2] - roi[0], roi_h = roi[3] - roi[1];
    if (align && !aligned) {
      roi_w = std::max(roi_w, 1.0);
      roi_h = std::max(roi_h, 1.0);
    }
    if (!align) {
      roi_w = std::max(roi_w + 1, 1.0);
      roi_h = std::max(roi_h + 1, 1.0);
    }
    const double bin_w = roi_w / static_cast<double>(pooled_w), bin_h = roi_h / static_cast<double>(pooled_h);
    const long long ph = element.size() == 4 ? element[2] : -1, pw = element.size() == 4 ? element[3] : -1;
    if (pooled_h * pooled_w <= 64 * 64)
      for (long long i = 0; i < pooled_h; ++i)
        for (long long j = 0; j < pooled_w; ++j) {
          const bool failing = i == ph && j == pw;
          const double x = roi[0] + static_cast<double>(j) * bin_w, y = roi[1] + static_cast<double>(i) * bin_h;
          svg += rect(f, x, y, x + bin_w, y + bin_h,
                      failing ? "fill:#d00;fill-opacity:0.15;stroke:#d00;stroke-width:2" : "fill:none;stroke:#c60",
                      fmt::format("bin ({}, {})", i, j));
        }
    if (align && ph >= 0 && pw >= 0) {
      const auto ratio = input.value("sampling_ratio", 0LL);
      const double grid_h = ratio > 0 ? static_cast<double>(ratio) : std::ceil(roi_h / static_cast<double>(pooled_h));
      const double grid_w = ratio > 0 ? static_cast<double>(ratio) : std::ceil(roi_w / static_cast<double>(pooled_w));
      if (grid_h * grid_w <= 1024)
        for (double iy = 0; iy < grid_h; ++iy)
          for (double ix = 0; ix < grid_w; ++ix) {
            const double y = roi[1] + static_cast<double>(ph) * bin_h + (iy + 0.5) * bin_h / grid_h;
            const double x = roi[0] + static_cast<double>(pw) * bin_w + (ix + 0.5) * bin_w / grid_w;
            const bool counts = y >= -1 && y <= height && x >= -1 && x <= width;
            svg += fmt::format("<circle class=\"sample\" cx=\"{:.2f}\" cy=\"{:.2f}\" r=\"3\" fill=\"{}\"><title>sample ({}, {}){}</title></circle>\n",
                               f.x(x), f.y(y), counts ? "#d00" : "#888", number(y), number(x), counts ? "" : ": outside, contributes 0");
          }
    }
  }
  std::string html = svg + "</svg>\n";
  html += legend({{"#eef", "feature map (pixel grid)"}, {"#c60", "RoI bins"}, {"#d00", "the failing bin and its sampling points"}});
  if (!have_roi) html += "<p>The RoI has non-finite coordinates: not drawn.</p>\n";
  return html;
}

std::string picture(const FindingRecord& f) {
  try {
    if (!f.input.is_object()) return "";
    if (f.input.contains("boxes") && f.input.contains("scores")) return nms_picture(f.input, f.details);
    if (f.input.contains("boxes1") && f.input.contains("boxes2")) return box_pairs_picture(f.input, f.details);
    if (f.input.contains("rois") && f.input.contains("input")) return roi_picture(f.input, f.details, f.op == "roi_align");
  } catch (const std::exception&) {
    // An input this renderer does not understand is shown as JSON below.
  }
  return "";
}

std::string values_table(const nlohmann::json& details) {
  if (!details.is_object()) return "";
  std::string rows;
  for (const char* key : {"element", "kernel", "oracle", "oracle_interval", "tolerance", "storage_tolerance",
                          "normalized_error", "kernel_argmax", "oracle_argmax", "kernel_keep", "oracle_keep", "death"})
    if (details.contains(key))
      rows += fmt::format("<tr><th>{}</th><td>{}</td></tr>\n", key, markup_escaped(json_scalar(details.at(key))));
  return rows.empty() ? "" : "<table class=\"values\">\n" + rows + "</table>\n";
}

std::string histogram_svg(const CellSummary& c) {
  const double width = 440, height = 150, bar = (width - 20) / static_cast<double>(kErrorHistogramBins);
  std::uint64_t most = 1;
  for (auto n : c.error_histogram) most = std::max(most, n);
  std::string svg = svg_open("histogram", width, height);
  for (std::size_t i = 0; i < c.error_histogram.size(); ++i) {
    const double h = (height - 40) * std::sqrt(static_cast<double>(c.error_histogram[i]) / static_cast<double>(most));
    const double x = 10 + static_cast<double>(i) * bar;
    const std::string label = i == 0 ? "0" : std::isinf(kErrorHistogramUpperEdges[i]) ? "inf" : fmt::format("{:g}", kErrorHistogramUpperEdges[i]);
    svg += fmt::format("<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"{:.1f}\" fill=\"{}\"><title>{} case(s) with error in ({}, {}]</title></rect>\n",
                       x + 1, height - 25 - h, bar - 2, h, kErrorHistogramUpperEdges[i] <= 1 ? "#4a4" : "#c33",
                       c.error_histogram[i], i == 0 ? "-" : fmt::format("{:g}", kErrorHistogramUpperEdges[i - 1]), label);
    if (i % 2 == 0)
      svg += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" font-size=\"9\" text-anchor=\"middle\">{}</text>\n", x + bar / 2, height - 12, label);
  }
  svg += fmt::format("<text x=\"10\" y=\"12\" font-size=\"10\">cases by normalized error (sqrt scale; above 1 fails)</text>\n");
  return svg + "</svg>\n";
}

std::string scatter_svg(const CellSummary& c) {
  const double width = 440, height = 150;
  auto lx = [](double m) { return std::log10(std::max(m, 1e-12)); };
  auto ly = [](double e) { return std::log10(std::clamp(e, 1e-9, 1e300)); };
  double x0 = INFINITY, x1 = -INFINITY, y0 = -1, y1 = 1;
  for (const auto& p : c.error_vs_magnitude) {
    x0 = std::min(x0, lx(p[0]));
    x1 = std::max(x1, lx(p[0]));
    y0 = std::min(y0, ly(p[1]));
    y1 = std::max(y1, ly(p[1]));
  }
  if (!(x1 > x0)) {
    x0 -= 1;
    x1 += 1;
  }
  auto px = [&](double v) { return 40 + (v - x0) / (x1 - x0) * (width - 50); };
  auto py = [&](double v) { return height - 20 - (v - y0) / (y1 - y0) * (height - 35); };
  std::string svg = svg_open("scatter", width, height);
  svg += fmt::format("<line x1=\"40\" x2=\"{:.1f}\" y1=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"#c33\" stroke-dasharray=\"4 3\"><title>normalized error 1: the tolerance</title></line>\n",
                     width - 10, py(0), py(0));
  for (const auto& p : c.error_vs_magnitude)
    svg += fmt::format("<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"2\" fill=\"{}\"><title>largest |input| {}, error {}</title></circle>\n",
                       px(lx(p[0])), py(ly(p[1])), p[1] <= 1 ? "#4a4" : "#c33", number(p[0]), number(p[1]));
  svg += fmt::format("<text x=\"40\" y=\"12\" font-size=\"10\">error (log) against largest |input value| (log, 1e{:.0f} .. 1e{:.0f})</text>\n", x0, x1);
  return svg + "</svg>\n";
}

}  // namespace

std::string html_report(const Report& report) {
  std::size_t failing = 0;
  for (const auto& f : report.findings) failing += f.fails;
  std::string html = "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>detfuzz report</title>\n";
  html += std::string("<style>") + kStyle + "</style>\n</head>\n<body>\n";
  html += fmt::format("<h1>detfuzz: {}</h1>\n", failing ? fmt::format("{} failing finding(s)", failing) : "no failing finding");
  html += fmt::format("<p id=\"totals\">{} cases in {:.1f} s, {} finding(s){}.</p>\n", report.total_cases(), report.elapsed_s,
                      report.findings.size(), report.partial ? " (partial: interrupted)" : "");
  html += "<details><summary>config and environment</summary><pre>" +
          markup_escaped(nlohmann::json{{"config", report.config}, {"environment", report.environment}}.dump(2)) +
          "</pre></details>\n";

  html += "<h2>Cells</h2>\n<table id=\"cells\">\n<tr><th>op</th><th>target</th><th>dtype</th><th>device</th><th>cases</th>"
          "<th>max normalized error</th><th>findings</th><th>status</th></tr>\n";
  for (const auto& c : report.cells)
    html += fmt::format("<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td>"
                        "<td class=\"num\">{}</td><td class=\"{}\">{}</td></tr>\n",
                        markup_escaped(c.op), markup_escaped(c.target), c.dtype, c.device, c.cases,
                        c.max_normalized_error < 0 ? "-" : number(c.max_normalized_error), c.findings, to_string(c.status),
                        markup_escaped(status_text(c)));
  html += "</table>\n";

  html += "<h2>Error distributions</h2>\n";
  for (const auto& c : report.cells) {
    if (c.error_histogram.empty() && c.error_vs_magnitude.empty()) continue;
    html += fmt::format("<section class=\"cell\"><h3>{}/{}/{}/{}</h3>\n", markup_escaped(c.op), markup_escaped(c.target),
                        c.dtype, c.device);
    if (!c.error_histogram.empty()) html += histogram_svg(c);
    if (!c.error_vs_magnitude.empty()) html += scatter_svg(c);
    html += "</section>\n";
  }

  html += "<h2>Findings</h2>\n";
  if (report.findings.empty()) html += "<p>None.</p>\n";
  for (const FindingRecord* finding : findings_in_display_order(report)) {
    const FindingRecord& f = *finding;
    html += fmt::format("<section class=\"finding {}\">\n<h3>{} {}/{}/{}/{}: {}{}</h3>\n", f.fails ? "failing" : "not-failing",
                        f.fails ? "FAILING" : f.outside_contract.empty() ? "not failing" : "outside the contract, not failing", markup_escaped(f.op), markup_escaped(f.target), f.dtype,
                        f.device, markup_escaped(f.kind), f.property.empty() ? "" : "/" + markup_escaped(f.property));
    html += "<p>" + markup_escaped(f.message) + "</p>\n";
    if (!f.outside_contract.empty())
      html += "<p class=\"contract\">outside the documented contract: " + markup_escaped(f.outside_contract) + "</p>\n";
    html += fmt::format("<p>minimized to {} in {} step(s); found after {} case(s).</p>\n", markup_escaped(minimized_size(f)),
                        f.shrink_steps, f.found_after_cases);
    html += picture(f);
    html += values_table(f.details);
    html += "<p>replay: <code class=\"replay\">" + markup_escaped(f.replay) + "</code></p>\n";
    if (!f.case_file.empty()) html += "<p>case file: <code>" + markup_escaped(f.case_file) + "</code></p>\n";
    std::string input = f.input.dump(1);
    if (input.size() > 20000) input = input.substr(0, 20000) + "\n... (truncated; the case file has it all)";
    html += "<details><summary>input and evidence</summary><pre>" + markup_escaped(input) + "\n" +
            markup_escaped(f.details.dump(1)) + "</pre></details>\n</section>\n";
  }
  html += "</body>\n</html>\n";
  return html;
}

}  // namespace detfuzz::reports
