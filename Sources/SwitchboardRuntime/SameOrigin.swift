import Foundation

/// Whether a state-changing request comes from the page of the server it reaches: the origin
/// the browser names (its Origin header, else its Referer's scheme, host and port) must be the
/// server's own, as reached (the scheme and the request's Host). Shared by the dashboard and
/// the desk; each adds its CSRF token on top.
public enum SameOrigin {
    /// Why the request is refused (for its answer), or nil when it is from `scheme://host`.
    /// - Parameter page: how the refusal names the page ("this dashboard", "the desk").
    public static func refusal(scheme: String, host: String?, origin: String?, referer: String?, page: String) -> String? {
        guard let host else { return "refused: the request names no Host\n" }
        let own = "\(scheme)://\(host)"
        let claimed: String
        if let origin {
            claimed = origin
        } else if let referer, let url = URL(string: referer), let scheme = url.scheme, let refererHost = url.host {
            claimed = "\(scheme)://\(refererHost)" + (url.port.map { ":\($0)" } ?? "")
        } else {
            return "refused: no Origin or Referer header; \(page) takes changes only from its own page\n"
        }
        guard claimed == own else {
            return "refused: cross-origin request (origin \(claimed), \(page) is \(own)); it takes changes only from its own page\n"
        }
        return nil
    }
}
