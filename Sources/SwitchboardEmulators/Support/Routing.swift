// How a request reaches an emulated API. Each API has its own Hummingbird `Router` (ETO's
// matches paths case-insensitively, as WCF does; the others do not), and the same middleware in
// front of its routes: `BodyLimit` (the body, collected up to the limit, 413 in the API's own
// shape), `RequestLogging` (the control API's request log), `FaultInjection` (the control API's
// faults), `ChangeTracking` (state to save) and `UnknownRoute` (a path the API does not serve,
// answered in its own shape). A route names its methods; every other method gets the API's
// "wrong method" answer, so a client learns what the real service would tell it.
//
// `EmulatorResponder` picks the router by the path's first segments: `/_emulator/…` is the
// control API, and each API claims its own prefix (`EmulatedAPI.owns`: SAP's service root
// `/{appId}` is claimed only for an application that exists).

import Foundation
import HTTPTypes
import Hummingbird
import NIOCore

/// A request's context: the path's segments (split and decoded once, by the dispatcher) and
/// the exchange the API's handlers read, which `BodyLimit` fills in before any route runs.
struct EmulatorContext: RequestContext {
    var coreContext: CoreRequestContextStorage
    var segments: [String] = []
    var exchange = Exchange(method: .get, path: "/", query: nil, headers: [:], body: Data())

    init(source: Source) { coreContext = .init(source: source) }
}

/// A handler of an emulated API: synchronous, over the exchange and the route's parameters.
typealias RouteHandler = @Sendable (Exchange, Parameters) -> Reply

extension HTTPRequest.Method {
    /// The methods a route answers, with a handler of its own or the API's "wrong method".
    static let routed: [Self] = [.get, .head, .post, .put, .patch, .delete, .options, .trace]
}

extension Router<EmulatorContext> {
    /// Routes each of `handlers`' methods at `path` to its handler, every other method to
    /// `otherwise`.
    func route(_ path: String, _ handlers: [HTTPRequest.Method: RouteHandler], otherwise: @escaping RouteHandler) {
        for method in HTTPRequest.Method.routed {
            let handler = handlers[method] ?? otherwise
            on(RouterPath(path), method: method) { _, context in Emulator.response(handler(context.exchange, context.parameters)) }
        }
    }
}

extension Parameters {
    /// A captured path segment, percent-decoded (as `Exchange.segments` decodes them).
    func segment(_ name: String) -> String {
        let raw = get(name) ?? ""
        return raw.contains("%") ? (raw.removingPercentEncoding ?? raw) : raw
    }
}

/// Picks the control API's router or the emulated API's that owns the path.
struct EmulatorResponder: HTTPResponder {
    typealias Context = EmulatorContext

    let control: RouterResponder<EmulatorContext>
    let apis: [(api: any EmulatedAPI, responder: RouterResponder<EmulatorContext>)]

    func respond(to request: Request, context: EmulatorContext) async throws -> Response {
        var context = context
        context.segments = Exchange.segments(of: request.uri.path)
        if context.segments.first == "_emulator" { return try await control.respond(to: request, context: context) }
        guard let owner = apis.first(where: { $0.api.owns(context.segments) }) else {
            return Emulator.response(.json(404, ["error": .string("no emulated API serves \(request.uri.path)")]))
        }
        return try await owner.responder.respond(to: request, context: context)
    }
}

/// Collects the body, up to `limit` bytes, into the context's exchange. Above the limit an API
/// answers `tooLarge` (its own error shape, 413); with none, the framework's 413 is thrown.
struct BodyLimit: RouterMiddleware {
    typealias Context = EmulatorContext

    let limit: Int
    /// `scheme://host[:port]` as the client reached the server (see `Exchange.origin`).
    let origin: @Sendable (Request) -> String
    let tooLarge: (@Sendable (Exchange) -> Reply)?

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        var context = context
        let segments = context.segments
        let origin = origin(request)
        func exchange(_ body: Data) -> Exchange {
            Exchange(
                method: request.method, path: request.uri.path, segments: segments, query: request.uri.query, headers: request.headers,
                body: body, origin: origin)
        }
        let body: ByteBuffer
        do {
            body = try await request.body.collect(upTo: limit)
        } catch {
            guard let tooLarge else { throw error }
            return Emulator.response(tooLarge(exchange(Data())))
        }
        context.exchange = exchange(Data(body.readableBytesView))
        return try await next(request, context)
    }
}

/// A path the router has no route for gets the API's own "not found".
struct UnknownRoute: RouterMiddleware {
    typealias Context = EmulatorContext

    let answer: @Sendable (Exchange) -> Reply

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        do {
            return try await next(request, context)
        } catch let error as HTTPError where error.status == .notFound {
            return Emulator.response(answer(context.exchange))
        }
    }
}

/// Notes that a handler may have changed the state (a successful call other than GET), so it is
/// saved within the second. Injected faults never reach it.
struct ChangeTracking: RouterMiddleware {
    typealias Context = EmulatorContext

    let changed: @Sendable () -> Void

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        let response = try await next(request, context)
        if request.method != .get, response.status.code < 400 { changed() }
        return response
    }
}
