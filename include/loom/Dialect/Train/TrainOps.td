//===- TrainOps.td - train operations ----------------------*- tablegen -*-===//
//
// The dialect's ops arrive with the model builder and autodiff; for now the
// dialect defines the role attributes only.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_DIALECT_TRAIN_TRAINOPS_TD
#define LOOM_DIALECT_TRAIN_TRAINOPS_TD

include "loom/Dialect/Train/TrainDialect.td"

#endif // LOOM_DIALECT_TRAIN_TRAINOPS_TD
