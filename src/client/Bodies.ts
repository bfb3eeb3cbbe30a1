import type * as HttpClientError from "@effect/platform/HttpClientError"
import type * as HttpClientResponse from "@effect/platform/HttpClientResponse"
import * as Effect from "effect/Effect"
import * as Stream from "effect/Stream"
import { transportError } from "./ErrorMapping.ts"
import type { TransportError } from "./Errors.ts"

/**
 * Reading a response body: a failure on the way (connection cut, idle timeout) is a retriable
 * TransportError naming the request, like a failure before the answer.
 */

export const bodyError = (response: HttpClientResponse.HttpClientResponse) => (error: HttpClientError.ResponseError) =>
  transportError(response.request, error.cause ?? error)

export const readText = (response: HttpClientResponse.HttpClientResponse): Effect.Effect<string, TransportError> =>
  Effect.mapError(response.text, bodyError(response))

export const readBytes = (response: HttpClientResponse.HttpClientResponse): Effect.Effect<Uint8Array, TransportError> =>
  Effect.mapError(
    Effect.map(response.arrayBuffer, (buffer) => new Uint8Array(buffer)),
    bodyError(response)
  )

export const bodyStream = (
  response: HttpClientResponse.HttpClientResponse
): Stream.Stream<Uint8Array, TransportError> => Stream.mapError(response.stream, bodyError(response))
