// The op table (model/op_table.h) is the one list of op families: the registry, the CLI's op
// names and the --bind contracts all come from it, in its order.
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "fuzz/ops/op_harness.h"
#include "kernels/target.h"
#include "model/op_table.h"

namespace detfuzz {
namespace {

TEST(OpTable, TheRegistryHoldsEveryRowInTableOrderUnderItsName) {
  const fuzz::Registry registry = fuzz::default_registry(kernels::KernelConfig{});
  ASSERT_EQ(registry.ops.size(), kOpCount);
  for (std::size_t i = 0; i < kOpCount; ++i) EXPECT_EQ(registry.ops[i]->name(), kOpRows[i].name) << "row " << i;
}

TEST(OpTable, NamesAreUniqueAndEachIdFindsItsOwnRow) {
  std::set<std::string> names;
  for (const OpRow& row : kOpRows) {
    EXPECT_TRUE(names.insert(row.name).second) << row.name << " is in the table twice";
    EXPECT_EQ(std::string(op_name(row.id)), row.name);
    ASSERT_NE(find_op_row(row.name), nullptr);
    EXPECT_EQ(find_op_row(row.name)->id, row.id);
  }
  EXPECT_EQ(find_op_row("no_such_op"), nullptr);
}

TEST(OpTable, BindContractsAreTheRowsThatHaveOneAndNameTheirOwnFamily) {
  const auto contracts = kernels::binding_contracts();
  std::size_t bindable = 0;
  for (const OpRow& row : kOpRows) bindable += row.bind_contract != nullptr;
  ASSERT_EQ(contracts.size(), bindable);
  for (const auto& [family, schema] : contracts) {
    const OpRow* row = find_op_row(family);
    ASSERT_NE(row, nullptr) << family;
    EXPECT_EQ(schema, row->bind_contract);
    EXPECT_NE(schema.find("->"), std::string::npos) << schema << ": a schema names its returns";
  }
}

}  // namespace
}  // namespace detfuzz
