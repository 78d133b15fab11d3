/// One statement (or part of one) as each engine spells it, side by side under one
/// name: what the policy beside it reads or writes is the same on both, and a
/// change to one spelling is seen next to the other's.
struct Spelling: Sendable {
    let sqlite: String
    let postgres: String
}

enum Statements {
    /// What sending a claimed delivery needs (read by `ClaimMapping`, in this order),
    /// and whether its device is still an active token of the delivery's user, app
    /// and kind (see `ClaimedDelivery.deviceActive`). `d` is the delivery, `n` its
    /// notification, `v` its device (LEFT JOIN), `p` its payload (LEFT JOIN).
    static let claimedColumns = Spelling(
        sqlite: """
            d.id, d.notification_id, d.user_id, d.device_id, d.token, d.environment, d.apns_id,
            coalesce(p.bytes, d.payload), d.push_type, d.priority, d.collapse_id, d.expiration,
            d.attempts, d.cross_environment_tried, n.app_type,
            coalesce(v.is_active = 1 AND v.user_id = d.user_id AND v.app_type = n.app_type
                     AND v.platform = (CASE d.push_type WHEN 'liveactivity' THEN 'liveactivity' ELSE 'ios' END),
                     0),
            coalesce(d.batched, 0)
            """,
        postgres: """
            d.id, d.notification_id, d.user_id, d.device_id, d.token, d.environment, d.apns_id,
            coalesce(p.bytes, d.payload), d.push_type, d.priority, d.collapse_id, d.expiration,
            d.attempts, d.cross_environment_tried, n.app_type,
            coalesce(v.is_active AND v.user_id = d.user_id AND v.app_type = n.app_type
                     AND v.platform = (CASE d.push_type WHEN 'liveactivity' THEN 'liveactivity' ELSE 'ios' END),
                     false),
            coalesce(d.batched, 0)
            """)
}
