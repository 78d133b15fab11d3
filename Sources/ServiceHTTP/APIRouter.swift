import Hummingbird
import ServiceCore
import ServiceDelivery
import Store

/// The API: every route behind its middleware, in the order a request meets them
/// (errors outermost, then the audit, then each route's auth and body), and the
/// 405 for a path that exists under another method last.
package enum APIRouter {
    package static func make(config: ServerConfig, store: any DeliveryStore, clock: any ServiceClock,
                             metrics: ServiceMetrics, wakeup: WorkerWakeup, handoff: (any DeliveryHandoff)? = nil,
                             broadcasts: Broadcasts, broadcastWakeup: WorkerWakeup) -> Router<ServiceContext> {
        let router = Router(context: ServiceContext.self)
        router.add(middleware: ErrorMiddleware())
        router.add(middleware: AuditMiddleware(store: store, clock: clock))
        let auth = Auth(apiKeys: config.apiKeys, jwtSecret: config.userJWTSecret, jwtClaims: config.userJWTClaims, clock: clock)
        let body = BodyReader(limit: config.maxBodyBytes)
        OpsRoutes(metrics: metrics, auth: auth, metricsToken: config.metricsToken.map(MetricsToken.init),
                  appTypes: config.apps.map(\.appType))
            .register(on: router)
        UserRoutes(config: config, store: store, clock: clock, body: body, auth: auth).register(on: router)
        BackendRoutes(config: config, store: store, clock: clock, body: body, auth: auth,
                      fanOut: FanOut(config: config, store: store, clock: clock, metrics: metrics, handoff: handoff),
                      worker: wakeup).register(on: router)
        LiveActivityRoutes(config: config, store: store, clock: clock, body: body, auth: auth, worker: wakeup).register(on: router)
        ChannelRoutes(config: config, store: store, clock: clock, body: body, auth: auth, broadcasts: broadcasts,
                      worker: broadcastWakeup).register(on: router)
        NotificationEventRoutes(store: store, clock: clock, body: body, auth: auth, metrics: metrics).register(on: router)
        WebhookEventRoutes(store: store, auth: auth).register(on: router)
        SupportRoutes(config: config, store: store, clock: clock, body: body, auth: auth, metrics: metrics,
                      worker: wakeup).register(on: router)
        AccessRoutes(store: store, auth: auth).register(on: router)
        if config.console { ConsoleRoutes().register(on: router) }
        // Last: it sees only the requests no route above took.
        router.add(middleware: MethodNotAllowedMiddleware(routes: router.routes))
        return router
    }
}
