// Merging the reports of a campaign's shards, and of re-runs of them.
//
// A merged report keeps the reports it came from (`parts`, each a report.json without
// parts) and derives its cells and findings from them, so merging is a set union over
// parts: commutative, associative and idempotent. A part is identified by its config
// (shard index included, `jobs` and the corpus path left out): a shard that ran twice
// counts once (the run with more cases; equal ones by content, so the choice does not
// depend on the order of the inputs).
//
// Derived view: a cell (op, target, dtype, device) sums its parts' cases, time, phases and
// occurrences; its max normalized error is the largest (other percentiles do not merge and
// are left out); it is unsupported only when every part says so. Findings are merged by
// signature: the smallest minimized case (then the lowest case index) represents it,
// occurrences add up.
#pragma once

#include <string>
#include <vector>

#include "reports/report.h"

namespace detfuzz::reports {

// Error{input} when two parts are of different campaigns (seed, matrix, cases or budget,
// shard count differ), naming the keys that differ.
Report merge_reports(const std::vector<Report>& reports);

// Copies the case file of every finding into `corpus_dir` (named by content hash, so the
// union of corpora is a union of files) and points the findings at the copies. A case file
// is looked for where the report says, then in `report_dirs`' corpus/ folders; returns the
// case files found nowhere.
std::vector<std::string> gather_corpus(Report& merged, const std::vector<std::string>& report_dirs,
                                       const std::string& corpus_dir);

}  // namespace detfuzz::reports
