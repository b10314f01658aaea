#include "reports/render.h"

#include <fmt/format.h>

#include <filesystem>

#include "corpus/atomic_file.h"
#include "model/op_table.h"
#include "reports/html.h"

namespace detfuzz::reports {
std::string markup_escaped(const std::string& text) {
  std::string out;
  for (unsigned char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&apos;"; break;
      default:
        // XML 1.0 allows no control characters but tab, newline and carriage return.
        if (c < 0x20 && c != '\t' && c != '\n' && c != '\r') out += ' ';
        else out += static_cast<char>(c);
    }
  }
  return out;
}

std::string minimized_size(const FindingRecord& f) {
  return fmt::format("{} {} (from {})", f.size, op_size_unit(f.op), f.original_size);
}

namespace {

std::string finding_line(const FindingRecord& f) {
  return fmt::format("[{}] {}: {}", f.kind, f.property, f.message);
}

std::string finding_body(const FindingRecord& f) {
  std::string body = fmt::format("{}\nminimized to {}, found after {} cases\nreplay: {}\n", finding_line(f),
                                 minimized_size(f), f.found_after_cases, f.replay);
  if (!f.case_file.empty()) body += "case file: " + f.case_file + "\n";
  return body;
}

std::string markdown_cell(std::string text) {  // a table cell: no pipes, no newlines
  for (char& c : text)
    if (c == '|' || c == '\n') c = ' ';
  return text;
}

}  // namespace

std::string junit_xml(const Report& report) {
  std::size_t failures = 0, skipped = 0;
  for (const auto& c : report.cells) {
    if (c.status == CellStatus::unsupported) ++skipped;
    for (const auto& f : report.findings) failures += found_in(f, c) && f.fails;
  }
  std::string xml = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  xml += fmt::format("<testsuites name=\"detfuzz\" tests=\"{}\" failures=\"{}\" errors=\"0\" skipped=\"{}\" time=\"{:.3f}\">\n",
                     report.cells.size(), failures, skipped, report.elapsed_s);
  xml += fmt::format("  <testsuite name=\"detfuzz\" tests=\"{}\" failures=\"{}\" errors=\"0\" skipped=\"{}\" time=\"{:.3f}\">\n",
                     report.cells.size(), failures, skipped, report.elapsed_s);
  for (const auto& c : report.cells) {
    xml += fmt::format("    <testcase classname=\"{}\" name=\"{}\" time=\"{:.3f}\">\n", markup_escaped(c.op),
                       markup_escaped(c.target + "/" + c.dtype + "/" + c.device + (c.case_name.empty() ? "" : " " + c.case_name)),
                       c.elapsed_s);
    if (c.status == CellStatus::unsupported) xml += fmt::format("      <skipped message=\"{}\"/>\n", markup_escaped(c.reason));
    std::string out = fmt::format("{} cases\n", c.cases);
    for (const auto& f : report.findings) {
      if (!found_in(f, c)) continue;
      if (f.fails)
        xml += fmt::format("      <failure message=\"{}\" type=\"{}\">{}</failure>\n", markup_escaped(finding_line(f)),
                           markup_escaped(f.kind), markup_escaped(finding_body(f)));
      else
        out += "not failing: " + finding_body(f);
    }
    xml += "      <system-out>" + markup_escaped(out) + "</system-out>\n";
    xml += "    </testcase>\n";
  }
  xml += "  </testsuite>\n</testsuites>\n";
  return xml;
}

std::string markdown_summary(const Report& report) {
  std::size_t failing = 0;
  for (const auto& f : report.findings) failing += f.fails;
  std::string md = fmt::format("## detfuzz: {}\n\n", failing ? fmt::format("{} failing finding(s)", failing) : "no failing finding");
  md += fmt::format("{} cases in {:.1f} s, {} finding(s){}.\n\n", report.total_cases(), report.elapsed_s,
                    report.findings.size(), report.partial ? " (partial: interrupted)" : "");
  md += "| op | target | dtype | device | cases | max normalized error | findings | status |\n";
  md += "|---|---|---|---|---:|---:|---:|---|\n";
  for (const auto& c : report.cells) {
    const std::string error = c.max_normalized_error < 0 ? "-" : fmt::format("{:.3g}", c.max_normalized_error);
    const std::string status = c.status == CellStatus::failed ? "**failed**" : status_text(c);
    md += fmt::format("| {} | {} | {} | {} | {} | {} | {} | {} |\n", markdown_cell(c.op), markdown_cell(c.target),
                      c.dtype, c.device, c.cases, error, c.findings, markdown_cell(status));
  }
  if (!report.findings.empty()) {
    md += "\n### Findings (failing first)\n\n";
    bool outside_heading = false;
    for (const FindingRecord* finding : findings_in_display_order(report)) {
      const FindingRecord& f = *finding;
      if (!f.fails && !f.outside_contract.empty() && !outside_heading) {
        md += "\n### Outside the documented input contract (not failing)\n\n";
        outside_heading = true;
      }
      md += fmt::format("- **{}** `{}/{}/{}` {}{}: {}\n", f.fails ? "failing" : "not failing", f.op, f.target, f.dtype,
                        f.kind, f.property.empty() ? "" : "/" + f.property, markdown_cell(f.message));
      if (!f.outside_contract.empty()) md += "  outside the contract: " + markdown_cell(f.outside_contract) + "\n";
      md += fmt::format("  minimized to {}; replay: `{}`\n", minimized_size(f), f.replay);
    }
  }
  return md;
}

std::string write_report_files(const Report& report, const std::string& dir) {
  const std::string path = write_report(report, dir);
  corpus::write_file_atomically((std::filesystem::path(dir) / "junit.xml").string(), junit_xml(report));
  corpus::write_file_atomically((std::filesystem::path(dir) / "summary.md").string(), markdown_summary(report));
  corpus::write_file_atomically((std::filesystem::path(dir) / "report.html").string(), html_report(report));
  return path;
}

}  // namespace detfuzz::reports
