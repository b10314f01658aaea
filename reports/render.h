// Renderings of a report for the places people look: JUnit XML for CI test tabs, Markdown
// for a job summary or a PR comment, HTML (reports/html.h) for people. All are written
// next to report.json by `run` and `merge`.
#pragma once

#include <string>

#include "reports/report.h"

namespace detfuzz::reports {

// One <testcase> per cell (classname op, name target/dtype/device): unsupported cells are
// <skipped>, a cell with failing findings has one <failure> per finding (its summary as the
// message, the replay command and case file in the body); non-failing findings go to
// <system-out>. The layout of the common JUnit schema (testsuites > testsuite > testcase).
std::string junit_xml(const Report& report);

// A summary table of cells, then each finding with its replay command.
std::string markdown_summary(const Report& report);

// Text escaped for XML and HTML content and attributes; control characters XML forbids
// become spaces.
std::string markup_escaped(const std::string& text);

// "3 RoIs (from 40)": a minimized finding's size in its op's unit (model/op_table.h).
std::string minimized_size(const FindingRecord& f);

// report.json, junit.xml, summary.md and report.html (reports/html.h) in `dir`; returns
// report.json's path.
std::string write_report_files(const Report& report, const std::string& dir);

}  // namespace detfuzz::reports
