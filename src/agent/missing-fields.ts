// MissingFieldSpec (handler API) to MissingField (wire).
import { create } from "@bufbuild/protobuf";
import { MissingFieldSchema, type MissingField } from "../../gen/synapse/v1/errors_pb.js";
import { toValue } from "../protocol/json-values.js";
import type { MissingFieldSpec } from "./handler.js";

export function toMissingField(spec: MissingFieldSpec): MissingField {
  return create(MissingFieldSchema, {
    field: spec.field,
    reason: spec.reason,
    suggestedValue: spec.suggestedValue === undefined ? undefined : toValue(spec.suggestedValue),
    alternatives: (spec.alternatives ?? []).map(toValue),
  });
}
