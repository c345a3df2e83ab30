// Tests that a communicator size that is not an integer or `?` is a parse
// error.
// RUN: not loom-opt %s 2>&1 | FileCheck %s
// CHECK: error: expected integer value
func.func private @f(!coll.comm<eight>)
