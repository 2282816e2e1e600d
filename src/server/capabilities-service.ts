// CapabilitiesService over RPC: a thin adapter onto CapabilitiesProvider.
import { create } from "@bufbuild/protobuf";
import type { ServiceImpl } from "@connectrpc/connect";
import {
  CapabilitiesService,
  GetCapabilitiesResponseSchema,
  GetSupportedInterfacesResponseSchema,
  GetTaskTypeCapabilitiesResponseSchema,
} from "../../gen/synapse/v1/capabilities_pb.js";
import type { CapabilitiesProvider } from "../capabilities/provider.js";

export function capabilitiesService(provider: CapabilitiesProvider): ServiceImpl<typeof CapabilitiesService> {
  return {
    getCapabilities: () => create(GetCapabilitiesResponseSchema, { capabilities: provider.getCapabilities() }),
    getSupportedInterfaces: () => create(GetSupportedInterfacesResponseSchema, { interfaces: provider.getSupportedInterfaces() }),
    getTaskTypeCapabilities: (request) =>
      create(GetTaskTypeCapabilitiesResponseSchema, { taskType: provider.getTaskTypeCapabilities(request.taskType) }),
    handshake: (request) => provider.handshake(request),
  };
}
