/// apns-server's API as an OpenAPI 3.1 document, served at `GET /openapi.json`
/// (no credential) for apps' and backends' client generators, and read by the
/// property-based API tests (schemathesis, scripts/api-test.sh).
///
/// It is kept in step with the router by `OpenAPITests`: a route the application
/// registers that is missing here fails it, and so does a path here that no route
/// serves. To add a route: add its path item under "paths" (the method, `operationId`,
/// `security`: `apiKey` for `/v1`, `userJWT` for `/api/user`, the parameters, the
/// request body and the statuses it answers, errors by `#/components/responses/…`),
/// reusing the schemas under "components".
///
/// The errors every operation of a kind answers are not written out: `served` adds
/// them (`impliedErrors`). Write only an operation's own (404, 409, 422, 503 …).
///
/// Written as JSON in the source, so that the binary carries it with no resource
/// bundle; constraints say what the server enforces, no more: a request the
/// document forbids must be refused with a 4xx.
enum OpenAPIDocument {
    static let text = #"""
{
  "openapi": "3.1.0",
  "info": {
    "title": "apns-server",
    "version": "1",
    "summary": "Apple push notifications for apps and their backends.",
    "description": "Two callers, two credentials, both sent as `Authorization: Bearer …`: an app sends its signed-in user's HS256 JWT (`/api/user/…`, the user is the token's `sub`), a backend sends one of the server's API keys (`/v1/…`). Every answer other than success is `{\"success\":false,\"error\":\"…\"}` with a 4xx or 5xx status, and a request refused with a 4xx stores nothing. Lists come a page at a time: `limit` (1 to 10,000, default 1,000) and `after` (the previous page's `next`; absent on the last page). Times are ISO-8601 UTC with milliseconds."
  },
  "security": [],
  "tags": [
    {"name": "app", "description": "Called by the app, with the signed-in user's JWT: the user's own devices, preferences and Live Activity tokens."},
    {"name": "backend", "description": "Called by the backend, with an API key: registering for users, sending, and reading the delivery log."},
    {"name": "channels", "description": "iOS 18 broadcast channels for Live Activities (API key), and the app's lookup of a channel it may follow (JWT)."},
    {"name": "support", "description": "What support needs when a customer says \"I never got the notification\" (API key), and the console at `/console` that calls these routes."},
    {"name": "ops", "description": "Health, metrics and this document."}
  ],
  "paths": {
    "/health": {
      "get": {
        "operationId": "health", "tags": ["ops"], "summary": "Liveness, for load balancers (no credential).",
        "security": [],
        "responses": {
          "200": {"description": "Serving.", "content": {"application/json": {
            "schema": {"type": "object", "required": ["status"], "properties": {"status": {"const": "ok"}}},
            "example": {"status": "ok"}}}}
        }
      }
    },
    "/metrics": {
      "get": {
        "operationId": "metrics", "tags": ["ops"], "summary": "Prometheus metrics.",
        "description": "The bearer is one of the API keys, or the `metrics_token_file` token when the config names one.",
        "security": [{"apiKey": []}],
        "responses": {
          "200": {"description": "Prometheus text exposition format.", "content": {"text/plain": {"schema": {"type": "string"}}}}
        }
      }
    },
    "/openapi.json": {
      "get": {
        "operationId": "openapi", "tags": ["ops"], "summary": "This document (no credential).",
        "description": "`AppType` lists the apps this server's config names.",
        "security": [],
        "responses": {
          "200": {"description": "OpenAPI 3.1.", "content": {"application/json": {"schema": {"type": "object", "required": ["openapi", "paths"]}}}}
        }
      }
    },
    "/api/user/device-token": {
      "post": {
        "operationId": "registerDevice", "tags": ["app"], "summary": "Register (or re-register) the user's device token.",
        "description": "An upsert: a token registered again is updated, not duplicated. The app calls it on every launch, on token refresh and after login.",
        "security": [{"userJWT": []}],
        "requestBody": {"required": true, "content": {"application/json": {
          "schema": {"$ref": "#/components/schemas/DeviceRegistration"},
          "example": {"deviceToken": "a1b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5c6d7e8f90", "platform": "ios", "appType": "staff", "deviceName": "iPhone 15 Pro", "osVersion": "17.4", "appVersion": "1.0.0"}}}},
        "responses": {
          "200": {"description": "Registered.", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Success"},
            "example": {"success": true, "message": "Device token registered successfully"}}}},
          "409": {"$ref": "#/components/responses/Conflict"},
          "503": {"$ref": "#/components/responses/Busy"}
        }
      },
      "delete": {
        "operationId": "unregisterDevice", "tags": ["app"], "summary": "Unregister a device token (on logout).",
        "description": "A soft delete: the token is kept, inactive, for the log.",
        "security": [{"userJWT": []}],
        "requestBody": {"required": true, "content": {"application/json": {
          "schema": {"$ref": "#/components/schemas/DeviceTokenBody"},
          "example": {"deviceToken": "a1b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5c6d7e8f90"}}}},
        "responses": {
          "200": {"description": "Unregistered.", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Success"},
            "example": {"success": true, "message": "Device token unregistered successfully"}}}},
          "404": {"$ref": "#/components/responses/NotFound"},
          "503": {"$ref": "#/components/responses/Busy"}
        }
      }
    },
    "/api/user/device-tokens": {
      "get": {
        "operationId": "listDevices", "tags": ["app"], "summary": "The user's active device tokens.",
        "security": [{"userJWT": []}],
        "responses": {
          "200": {"description": "The user's devices, most recently used first.", "content": {"application/json": {
            "schema": {"type": "object", "required": ["success", "tokens"], "properties": {
              "success": {"const": true},
              "tokens": {"type": "array", "items": {"$ref": "#/components/schemas/Device"}}}},
            "example": {"success": true, "tokens": [{"id": 1, "platform": "ios", "app_type": "staff", "device_name": "iPhone 15 Pro", "os_version": "17.4", "app_version": "1.0.0", "last_used_at": "2026-11-22T21:28:00.123Z", "created_at": "2026-11-20T09:00:00.000Z"}]}}}},
          "503": {"$ref": "#/components/responses/Busy"}
        }
      }
    },
    "/api/user/push-preferences": {
      "get": {
        "operationId": "getPreferences", "tags": ["app"], "summary": "The user's push preferences for an app.",
        "description": "`notificationsEnabled` (the master toggle), then the app's toggles in config order (true until saved), then the quiet-hours keys when the app uses them or the user saved one.",
        "security": [{"userJWT": []}],
        "parameters": [{"$ref": "#/components/parameters/PreferenceAppType"}],
        "responses": {
          "200": {"description": "The preferences.", "content": {"application/json": {
            "schema": {"type": "object", "required": ["success", "preferences"], "properties": {
              "success": {"const": true},
              "preferences": {"$ref": "#/components/schemas/Preferences"}}},
            "example": {"success": true, "preferences": {"notificationsEnabled": true, "orderStatusChanged": true, "orderCreated": true, "orderCollected": true, "deviceStatusChanged": true, "quoteApproved": true, "quoteRejected": true, "paymentReceived": true, "newEnquiry": true, "enquiryReply": true}}}}},
          "400": {"$ref": "#/components/responses/BadRequest"},
          "503": {"$ref": "#/components/responses/Busy"}
        }
      },
      "put": {
        "operationId": "putPreferences", "tags": ["app"], "summary": "Change some of the user's preferences.",
        "description": "A partial body: only the keys given change. A key the app does not declare is a 400.",
        "security": [{"userJWT": []}],
        "parameters": [{"$ref": "#/components/parameters/PreferenceAppType"}],
        "requestBody": {"required": true, "content": {"application/json": {
          "schema": {"$ref": "#/components/schemas/Preferences"},
          "examples": {
            "toggle": {"summary": "RepairMinder: no more new-enquiry pushes", "value": {"newEnquiry": false}},
            "quietHours": {"summary": "Chravel: quiet hours", "value": {"quietHoursEnabled": true, "quietHoursStart": "22:00", "quietHoursEnd": "08:00", "timeZone": "Europe/London"}}}}}},
        "responses": {
          "200": {"description": "Saved.", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Success"},
            "example": {"success": true, "message": "Push preferences updated successfully"}}}},
          "503": {"$ref": "#/components/responses/Busy"}
        }
      }
    },
    "/api/user/live-activity-token": {
      "post": {
        "operationId": "registerLiveActivityToken", "tags": ["app"], "summary": "Register a Live Activity token.",
        "description": "With `activityId`: the update token of that running activity. Without: the app's push-to-start token for `attributesType`.",
        "security": [{"userJWT": []}],
        "requestBody": {"required": true, "content": {"application/json": {
          "schema": {"$ref": "#/components/schemas/LiveActivityRegistration"},
          "example": {"pushToken": "5b1e5b1e5b1e5b1e5b1e5b1e5b1e5b1e5b1e5b1e5b1e5b1e5b1e5b1e5b1e5b1e", "appType": "travel", "attributesType": "FlightAttributes", "activityId": "flight-BA123"}}}},
        "responses": {
          "200": {"description": "Registered.", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Success"},
            "example": {"success": true, "message": "Live Activity token registered successfully"}}}},
          "409": {"$ref": "#/components/responses/Conflict"},
          "503": {"$ref": "#/components/responses/Busy"}
        }
      },
      "delete": {
        "operationId": "unregisterLiveActivityToken", "tags": ["app"], "summary": "Unregister a Live Activity token.",
        "security": [{"userJWT": []}],
        "requestBody": {"required": true, "content": {"application/json": {
          "schema": {"$ref": "#/components/schemas/PushTokenBody"},
          "example": {"pushToken": "5b1e5b1e5b1e5b1e5b1e5b1e5b1e5b1e5b1e5b1e5b1e5b1e5b1e5b1e5b1e5b1e"}}}},
        "responses": {
          "200": {"description": "Unregistered.", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Success"},
            "example": {"success": true, "message": "Live Activity token unregistered successfully"}}}},
          "404": {"$ref": "#/components/responses/NotFound"},
          "503": {"$ref": "#/components/responses/Busy"}
        }
      }
    },
    "/api/user/live-activity-tokens": {
      "get": {
        "operationId": "listLiveActivityTokens", "tags": ["app"], "summary": "The user's active Live Activity tokens.",
        "security": [{"userJWT": []}],
        "responses": {
          "200": {"description": "The tokens.", "content": {"application/json": {
            "schema": {"type": "object", "required": ["success", "tokens"], "properties": {
              "success": {"const": true},
              "tokens": {"type": "array", "items": {"$ref": "#/components/schemas/LiveActivityToken"}}}}}}},
          "503": {"$ref": "#/components/responses/Busy"}
        }
      }
    },
    "/api/user/live-activity-channel": {
      "get": {
        "operationId": "liveActivityChannel", "tags": ["channels"], "summary": "The broadcast channel of an entity, for the app to follow.",
        "description": "Only a channel whose audience includes the user; any other answers 404, as one that does not exist.",
        "security": [{"userJWT": []}],
        "parameters": [
          {"name": "appType", "in": "query", "required": true, "schema": {"$ref": "#/components/schemas/AppType"}, "example": "travel"},
          {"name": "entityType", "in": "query", "required": true, "schema": {"$ref": "#/components/schemas/Identifier"}, "example": "trip"},
          {"name": "entityId", "in": "query", "required": true, "schema": {"$ref": "#/components/schemas/Identifier"}, "example": "trip-lisbon-2026"},
          {"name": "environment", "in": "query", "schema": {"$ref": "#/components/schemas/EnvironmentName"}}
        ],
        "responses": {
          "200": {"description": "The channel id.", "content": {"application/json": {
            "schema": {"type": "object", "required": ["success", "channelId"], "properties": {"success": {"const": true}, "channelId": {"type": "string"}}},
            "example": {"success": true, "channelId": "dHN0LXNyY2gtY2hubA=="}}}},
          "400": {"$ref": "#/components/responses/BadRequest"},
          "404": {"$ref": "#/components/responses/NotFound"},
          "503": {"$ref": "#/components/responses/Busy"}
        }
      }
    },
    "/api/user/notification-events": {
      "post": {
        "operationId": "reportNotificationEvent", "tags": ["app"], "summary": "Report that a notification was received or opened.",
        "description": "Only for a delivery made to the signed-in user (any other apns-id is a 404), and only once APNs took it (a failed or pending delivery is a 409). An `at` before the send is read as the send. The first time is kept; an open implies a receipt.",
        "security": [{"userJWT": []}],
        "requestBody": {"required": true, "content": {"application/json": {
          "schema": {"$ref": "#/components/schemas/NotificationEvent"},
          "example": {"apns_id": "2f8c1e4a-9b3d-4c6e-8f1a-7d5b3c9e2a10", "event": "opened"}}}},
        "responses": {
          "200": {"description": "Recorded (or already known).", "content": {"application/json": {
            "schema": {"type": "object", "required": ["success", "apns_id", "received_at", "opened_at"], "properties": {
              "success": {"const": true}, "apns_id": {"type": "string"},
              "received_at": {"$ref": "#/components/schemas/Timestamp"}, "opened_at": {"$ref": "#/components/schemas/Timestamp"}}}}}},
          "404": {"$ref": "#/components/responses/NotFound"},
          "409": {"$ref": "#/components/responses/Conflict"},
          "503": {"$ref": "#/components/responses/Busy"}
        }
      }
    },
    "/v1/users/{user_id}/device-tokens": {
      "get": {
        "operationId": "listUserDeviceTokens", "tags": ["support"], "summary": "Every device token of a user, active or not, and why not.",
        "description": "Active first, newest registration first. Live Activity tokens are not listed.",
        "security": [{"apiKey": []}],
        "parameters": [{"$ref": "#/components/parameters/UserID"}],
        "responses": {
          "200": {"description": "The user's tokens.", "content": {"application/json": {
            "schema": {"type": "object", "required": ["user_id", "tokens"], "properties": {
              "user_id": {"type": "string"},
              "tokens": {"type": "array", "items": {"$ref": "#/components/schemas/SupportDevice"}}}}}}},
          "400": {"$ref": "#/components/responses/BadRequest"},
          "503": {"$ref": "#/components/responses/Busy"}
        }
      },
      "post": {
        "operationId": "registerDeviceForUser", "tags": ["backend"], "summary": "Register a device token for a user.",
        "description": "The app's registration, made by the backend for the user in the path.",
        "security": [{"apiKey": []}],
        "parameters": [{"$ref": "#/components/parameters/UserID"}],
        "requestBody": {"required": true, "content": {"application/json": {
          "schema": {"$ref": "#/components/schemas/BackendDeviceRegistration"},
          "example": {"deviceToken": "0f1e2d3c4b5a69788796a5b4c3d2e1f00f1e2d3c4b5a69788796a5b4c3d2e1f0", "platform": "ios", "appType": "staff", "company_id": "shop-1", "deviceName": "iPhone 13", "osVersion": "17.2", "appVersion": "1.0.0"}}}},
        "responses": {
          "200": {"description": "Registered.", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Success"},
            "example": {"success": true, "message": "Device token registered successfully"}}},
            "links": {
              "sendToUser": {"operationId": "sendNotification", "description": "Send the user a notification.",
                "requestBody": {"type": "order_status_changed", "app_type": "$request.body#/appType", "user_ids": ["$request.path.user_id"], "alert": {"title": "Order Ready", "body": "Order #1234 is ready for collection"}}}
            }},
          "409": {"$ref": "#/components/responses/Conflict"},
          "503": {"$ref": "#/components/responses/Busy"}
        }
      }
    },
    "/v1/device-tokens": {
      "post": {
        "operationId": "registerDevices", "tags": ["backend"], "summary": "Register many users' device tokens at once (at most 1,000).",
        "description": "All are checked first (one bad entry is a 400 naming it), then all are stored in one transaction, or none.",
        "security": [{"apiKey": []}],
        "parameters": [{"$ref": "#/components/parameters/IdempotencyKey"}],
        "requestBody": {"required": true, "content": {"application/json": {
          "schema": {"type": "object", "required": ["devices"], "properties": {
            "devices": {"type": "array", "maxItems": 1000, "items": {"$ref": "#/components/schemas/BulkDeviceRegistration"}}}},
          "example": {"devices": [
            {"user_id": "staff-1", "company_id": "shop-1", "deviceToken": "a1b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5c6d7e8f90", "platform": "ios", "appType": "staff"},
            {"user_id": "staff-2", "company_id": "shop-1", "deviceToken": "0f1e2d3c4b5a69788796a5b4c3d2e1f00f1e2d3c4b5a69788796a5b4c3d2e1f0", "platform": "ios", "appType": "staff"}]}}}},
        "responses": {
          "200": {"description": "All registered.", "headers": {"Idempotent-Replayed": {"$ref": "#/components/headers/IdempotentReplayed"}},
            "content": {"application/json": {
            "schema": {"type": "object", "required": ["success", "registered"], "properties": {"success": {"const": true}, "registered": {"type": "integer", "minimum": 0}}},
            "example": {"success": true, "registered": 2}}}},
          "409": {"$ref": "#/components/responses/Conflict"},
          "422": {"$ref": "#/components/responses/KeyReused"},
          "503": {"$ref": "#/components/responses/Busy"}
        }
      }
    },
    "/v1/notifications": {
      "get": {
        "operationId": "listNotifications", "tags": ["support"], "summary": "Recent notifications with their counts, newest first.",
        "security": [{"apiKey": []}],
        "parameters": [{"$ref": "#/components/parameters/SupportLimit"}, {"$ref": "#/components/parameters/TimeAfter"}],
        "responses": {
          "200": {"description": "A page of notifications.", "content": {"application/json": {
            "schema": {"type": "object", "required": ["notifications"], "properties": {
              "notifications": {"type": "array", "items": {"type": "object",
                "required": ["notification_id", "type", "app_type", "entity_id", "created_at", "summary"], "properties": {
                "notification_id": {"type": "string"}, "type": {"type": "string"}, "app_type": {"type": "string"},
                "entity_id": {"type": ["string", "null"]}, "created_at": {"$ref": "#/components/schemas/Timestamp"},
                "summary": {"type": "object", "required": ["pending", "delivered", "failed"], "additionalProperties": {"type": "integer", "minimum": 0}}}}},
              "next": {"$ref": "#/components/schemas/TimeCursor"}}}}},
            "links": {"readLog": {"operationId": "getNotification", "parameters": {"id": "$response.body#/notifications/0/notification_id"}}}},
          "400": {"$ref": "#/components/responses/BadRequest"},
          "503": {"$ref": "#/components/responses/Busy"}
        }
      },
      "post": {
        "operationId": "sendNotification", "tags": ["backend"], "summary": "Send a notification to users (or a company's users).",
        "description": "Every targeted user's active iOS tokens of the app whose preferences allow the type get one delivery each, committed before the 202. With `send_at` it is stored and sent at that time instead.",
        "security": [{"apiKey": []}],
        "parameters": [{"$ref": "#/components/parameters/IdempotencyKey"}],
        "requestBody": {"required": true, "content": {"application/json": {
          "schema": {"$ref": "#/components/schemas/NotificationRequest"},
          "examples": {
            "repairminder": {"summary": "RepairMinder: an order is ready, per-user badges", "value": {"type": "order_status_changed", "entity_type": "order", "entity_id": "order-uuid", "app_type": "staff", "user_ids": ["staff-1", "staff-2"], "alert": {"title": "Order Ready", "body": "Order #1234 is ready for collection"}, "badge": {"staff-1": 3, "staff-2": 2}, "sound": "default"}},
            "chravel": {"summary": "Chravel: a trip message", "value": {"type": "message", "app_type": "travel", "user_ids": ["traveller"], "alert": {"title": "Lisbon", "body": "Dinner moved to 20:30"}, "sound": "default", "mutable_content": true, "priority": "normal", "data": {"tripId": "trip-lisbon-2026"}}},
            "ops": {"summary": "OPS: a schedule change (batched per job)", "value": {"type": "scheduleChange", "entity_type": "task", "entity_id": "job-123", "entity_title": "123 Main St", "app_type": "ops", "user_ids": ["tech"], "alert": {"title": "Job 123", "body": "Moved to 14:00"}, "data": {"taskId": "job-123", "screen": "taskDetails"}}},
            "scheduled": {"summary": "Scheduled for later", "value": {"type": "eventReminder", "app_type": "travel", "user_ids": ["traveller"], "alert": {"title": "Tomorrow", "body": "Walking tour at 09:00"}, "send_at": "2026-03-08T09:00:00Z", "schedule_key": "reminder-tour-1"}}}}}},
        "responses": {
          "202": {"description": "Accepted: the deliveries are in the outbox (or the notification is scheduled).",
            "headers": {"Idempotent-Replayed": {"$ref": "#/components/headers/IdempotentReplayed"}},
            "content": {"application/json": {
              "schema": {"$ref": "#/components/schemas/NotificationAccepted"},
              "example": {"notification_id": "6f0b8c2e-3d1a-4b5c-9e7f-1a2b3c4d5e6f", "deliveries": 2, "skipped": {"preferences": 0, "no_devices": 0}}}},
            "links": {
              "readLog": {"operationId": "getNotification", "description": "The notification's delivery log.", "parameters": {"id": "$response.body#/notification_id"}},
              "cancel": {"operationId": "cancelNotification", "description": "Cancel what has not gone yet.", "parameters": {"id": "$response.body#/notification_id"}}
            }},
          "409": {"$ref": "#/components/responses/Conflict"},
          "422": {"$ref": "#/components/responses/KeyReused"},
          "503": {"$ref": "#/components/responses/Busy"}
        }
      }
    },
    "/v1/notifications/{id}": {
      "get": {
        "operationId": "getNotification", "tags": ["backend"], "summary": "A notification's summary and delivery log, a page at a time.",
        "security": [{"apiKey": []}],
        "parameters": [{"$ref": "#/components/parameters/NotificationID"}, {"$ref": "#/components/parameters/Limit"}, {"$ref": "#/components/parameters/After"}],
        "responses": {
          "200": {"description": "The summary counts every delivery; `deliveries` is one page.", "content": {"application/json": {
            "schema": {"$ref": "#/components/schemas/NotificationLog"},
            "example": {"notification_id": "6f0b8c2e-3d1a-4b5c-9e7f-1a2b3c4d5e6f", "type": "order_status_changed", "entity_id": "order-uuid", "created_at": "2026-11-22T21:28:00.123Z", "summary": {"pending": 0, "delivered": 2, "failed": 0},
              "deliveries": [{"user_id": "staff-1", "token": "a1b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5c6d7e8f90", "environment": "production", "state": "delivered", "apns_id": "2f8c1e4a-9b3d-4c6e-8f1a-7d5b3c9e2a10", "status": 200, "reason": null, "timestamp": null, "attempts": 1, "finished_at": "2026-11-22T21:28:00.456Z"}]}}},
            "links": {
              "firstDelivery": {"operationId": "getDelivery", "description": "One delivery by its apns-id.", "parameters": {"apns_id": "$response.body#/deliveries/0/apns_id"}},
              "openedByApp": {"operationId": "reportNotificationEvent", "description": "The app reports the first delivery opened (when it went to the app's user).", "requestBody": {"apns_id": "$response.body#/deliveries/0/apns_id", "event": "opened"}}
            }},
          "400": {"$ref": "#/components/responses/BadRequest"},
          "404": {"$ref": "#/components/responses/NotFound"},
          "503": {"$ref": "#/components/responses/Busy"}
        }
      },
      "delete": {
        "operationId": "cancelNotification", "tags": ["backend"], "summary": "Cancel what has not gone yet.",
        "description": "A scheduled notification not yet fanned out is cancelled whole (its log, `state: cancelled`). For one already fanned out, every delivery no worker holds yet (due, held by quiet hours or a batching window, back for a retry) becomes `cancelled`; what went or is in a worker's hands is counted and left alone. The notification stays readable afterwards, its cancelled deliveries in the log. 409 while a schedule is being fanned out, or when it was superseded or failed.",
        "security": [{"apiKey": []}],
        "parameters": [{"$ref": "#/components/parameters/NotificationID"}],
        "responses": {
          "200": {"description": "Cancelled: a scheduled notification's log, or the counts of a fanned-out one's deliveries.", "content": {"application/json": {"schema": {"oneOf": [
            {"$ref": "#/components/schemas/NotificationLog"},
            {"type": "object", "required": ["notification_id", "cancelled", "already_sent", "in_flight"], "properties": {
              "notification_id": {"type": "string"},
              "cancelled": {"type": "integer", "minimum": 0}, "already_sent": {"type": "integer", "minimum": 0},
              "in_flight": {"type": "integer", "minimum": 0}}}]},
            "example": {"notification_id": "6f0b8c2e-3d1a-4b5c-9e7f-1a2b3c4d5e6f", "cancelled": 2, "already_sent": 1, "in_flight": 0}}}},
          "404": {"$ref": "#/components/responses/NotFound"},
          "409": {"$ref": "#/components/responses/Conflict"},
          "503": {"$ref": "#/components/responses/Busy"}
        }
      }
    },
    "/v1/deliveries": {
      "get": {
        "operationId": "getDelivery", "tags": ["backend"], "summary": "One delivery, by the apns-id APNs knows it by.",
        "security": [{"apiKey": []}],
        "parameters": [{"name": "apns_id", "in": "query", "required": true, "schema": {"type": "string", "minLength": 1}, "example": "2f8c1e4a-9b3d-4c6e-8f1a-7d5b3c9e2a10"}],
        "responses": {
          "200": {"description": "The delivery.", "content": {"application/json": {"schema": {"allOf": [
            {"$ref": "#/components/schemas/Delivery"},
            {"type": "object", "required": ["notification_id"], "properties": {"notification_id": {"type": "string"}}}]}}}},
          "400": {"$ref": "#/components/responses/BadRequest"},
          "404": {"$ref": "#/components/responses/NotFound"},
          "503": {"$ref": "#/components/responses/Busy"}
        }
      }
    },
    "/v1/users/{user_id}/live-activity-tokens": {
      "post": {
        "operationId": "registerLiveActivityTokenForUser", "tags": ["backend"], "summary": "Register a Live Activity token for a user.",
        "security": [{"apiKey": []}],
        "parameters": [{"$ref": "#/components/parameters/UserID"}],
        "requestBody": {"required": true, "content": {"application/json": {
          "schema": {"$ref": "#/components/schemas/LiveActivityRegistration"},
          "example": {"pushToken": "5b1e5b1e5b1e5b1e5b1e5b1e5b1e5b1e5b1e5b1e5b1e5b1e5b1e5b1e5b1e5b1e", "appType": "travel", "attributesType": "FlightAttributes"}}}},
        "responses": {
          "200": {"description": "Registered.", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Success"}}}},
          "409": {"$ref": "#/components/responses/Conflict"},
          "503": {"$ref": "#/components/responses/Busy"}
        }
      }
    },
    "/v1/live-activities": {
      "post": {
        "operationId": "sendLiveActivity", "tags": ["backend"], "summary": "Start, update or end a Live Activity.",
        "description": "start: `user_ids` and `attributes_type` (their push-to-start tokens). update and end: `activity_id`, or `user_ids` (their update tokens, of `attributes_type` when given).",
        "security": [{"apiKey": []}],
        "parameters": [{"$ref": "#/components/parameters/IdempotencyKey"}],
        "requestBody": {"required": true, "content": {"application/json": {
          "schema": {"$ref": "#/components/schemas/LiveActivityRequest"},
          "example": {"app_type": "travel", "event": "update", "activity_id": "flight-BA123", "content_state": {"gate": "B32", "status": "boarding"}}}}},
        "responses": {
          "202": {"description": "Accepted: the deliveries are in the outbox (or it is scheduled).",
            "headers": {"Idempotent-Replayed": {"$ref": "#/components/headers/IdempotentReplayed"}},
            "content": {"application/json": {"schema": {"$ref": "#/components/schemas/NotificationAccepted"}}},
            "links": {"readLog": {"operationId": "getNotification", "parameters": {"id": "$response.body#/notification_id"}}}},
          "409": {"$ref": "#/components/responses/Conflict"},
          "422": {"$ref": "#/components/responses/KeyReused"},
          "503": {"$ref": "#/components/responses/Busy"}
        }
      }
    },
    "/v1/channels": {
      "post": {
        "operationId": "createChannel", "tags": ["channels"], "summary": "Create an entity's broadcast channel (on APNs, then stored).",
        "description": "Idempotent by key (app, environment, entity): the channel a key already has is answered with 200 and `created: false`. APNs' refusal is a 502 with its reason; no answer from APNs is a 503.",
        "security": [{"apiKey": []}],
        "parameters": [{"$ref": "#/components/parameters/IdempotencyKey"}],
        "requestBody": {"required": true, "content": {"application/json": {
          "schema": {"$ref": "#/components/schemas/ChannelRequest"},
          "example": {"app_type": "travel", "entity_type": "trip", "entity_id": "trip-lisbon-2026", "environment": "production", "audience": {"users": ["traveller"]}}}}},
        "responses": {
          "200": {"description": "The channel the key already had.", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Channel"}}},
            "links": {"read": {"$ref": "#/components/links/ReadChannel"}, "broadcast": {"$ref": "#/components/links/BroadcastToChannel"}, "delete": {"$ref": "#/components/links/DeleteChannel"}, "forApp": {"$ref": "#/components/links/ChannelForApp"}}},
          "201": {"description": "Created.", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Channel"}}},
            "links": {"read": {"$ref": "#/components/links/ReadChannel"}, "broadcast": {"$ref": "#/components/links/BroadcastToChannel"}, "delete": {"$ref": "#/components/links/DeleteChannel"}, "forApp": {"$ref": "#/components/links/ChannelForApp"}}},
          "409": {"$ref": "#/components/responses/Conflict"},
          "422": {"$ref": "#/components/responses/KeyReused"},
          "502": {"$ref": "#/components/responses/APNsRefused"},
          "503": {"$ref": "#/components/responses/Busy"}
        }
      },
      "get": {
        "operationId": "listChannels", "tags": ["channels"], "summary": "An app's channels.",
        "security": [{"apiKey": []}],
        "parameters": [
          {"name": "app_type", "in": "query", "required": true, "schema": {"$ref": "#/components/schemas/AppType"}, "example": "travel"},
          {"name": "environment", "in": "query", "schema": {"$ref": "#/components/schemas/EnvironmentName"}},
          {"name": "entity_type", "in": "query", "schema": {"type": "string"}}
        ],
        "responses": {
          "200": {"description": "The channels.", "content": {"application/json": {
            "schema": {"type": "object", "required": ["channels"], "properties": {"channels": {"type": "array", "items": {"$ref": "#/components/schemas/Channel"}}}}}}},
          "400": {"$ref": "#/components/responses/BadRequest"},
          "503": {"$ref": "#/components/responses/Busy"}
        }
      }
    },
    "/v1/channels/{app_type}/{entity_type}/{entity_id}": {
      "parameters": [
        {"name": "app_type", "in": "path", "required": true, "schema": {"$ref": "#/components/schemas/AppType"}, "example": "travel"},
        {"name": "entity_type", "in": "path", "required": true, "schema": {"$ref": "#/components/schemas/Identifier"}, "example": "trip"},
        {"name": "entity_id", "in": "path", "required": true, "schema": {"$ref": "#/components/schemas/Identifier"}, "example": "trip-lisbon-2026"}
      ],
      "get": {
        "operationId": "getChannel", "tags": ["channels"], "summary": "One channel.",
        "security": [{"apiKey": []}],
        "parameters": [{"name": "environment", "in": "query", "schema": {"$ref": "#/components/schemas/EnvironmentName"}}],
        "responses": {
          "200": {"description": "The channel.", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Channel"}}}},
          "400": {"$ref": "#/components/responses/BadRequest"},
          "404": {"$ref": "#/components/responses/NotFound"},
          "503": {"$ref": "#/components/responses/Busy"}
        }
      },
      "delete": {
        "operationId": "deleteChannel", "tags": ["channels"], "summary": "Delete a channel (on APNs, then in the store).",
        "security": [{"apiKey": []}],
        "parameters": [{"name": "environment", "in": "query", "schema": {"$ref": "#/components/schemas/EnvironmentName"}}],
        "responses": {
          "200": {"description": "Deleted.", "content": {"application/json": {"schema": {"allOf": [
            {"$ref": "#/components/schemas/Channel"},
            {"type": "object", "required": ["deleted"], "properties": {"deleted": {"const": true}}}]}}}},
          "400": {"$ref": "#/components/responses/BadRequest"},
          "404": {"$ref": "#/components/responses/NotFound"},
          "502": {"$ref": "#/components/responses/APNsRefused"},
          "503": {"$ref": "#/components/responses/Busy"}
        }
      }
    },
    "/v1/channels/{app_type}/{entity_type}/{entity_id}/broadcasts": {
      "post": {
        "operationId": "broadcast", "tags": ["channels"], "summary": "Update or end the Live Activities following an entity's channel.",
        "description": "Recorded, then sent by the broadcast worker: 202 once recorded. `environment` in the body (or the query) picks the channel.",
        "security": [{"apiKey": []}],
        "parameters": [
          {"name": "app_type", "in": "path", "required": true, "schema": {"$ref": "#/components/schemas/AppType"}, "example": "travel"},
          {"name": "entity_type", "in": "path", "required": true, "schema": {"$ref": "#/components/schemas/Identifier"}, "example": "trip"},
          {"name": "entity_id", "in": "path", "required": true, "schema": {"$ref": "#/components/schemas/Identifier"}, "example": "trip-lisbon-2026"},
          {"$ref": "#/components/parameters/IdempotencyKey"}
        ],
        "requestBody": {"required": true, "content": {"application/json": {
          "schema": {"$ref": "#/components/schemas/BroadcastRequest"},
          "example": {"event": "update", "content_state": {"gate": "B32", "status": "boarding"}}}}},
        "responses": {
          "202": {"description": "Recorded.", "headers": {"Idempotent-Replayed": {"$ref": "#/components/headers/IdempotentReplayed"}},
            "content": {"application/json": {"schema": {"type": "object", "required": ["broadcast_id", "channel_id"], "properties": {
              "broadcast_id": {"type": "string"}, "channel_id": {"type": "string"}}}}},
            "links": {"readLog": {"operationId": "getBroadcast", "parameters": {"id": "$response.body#/broadcast_id"}}}},
          "404": {"$ref": "#/components/responses/NotFound"},
          "409": {"$ref": "#/components/responses/Conflict"},
          "422": {"$ref": "#/components/responses/KeyReused"},
          "503": {"$ref": "#/components/responses/Busy"}
        }
      }
    },
    "/v1/broadcasts/{id}": {
      "get": {
        "operationId": "getBroadcast", "tags": ["channels"], "summary": "A broadcast's log entry.",
        "security": [{"apiKey": []}],
        "parameters": [{"name": "id", "in": "path", "required": true, "schema": {"type": "string", "minLength": 1}}],
        "responses": {
          "200": {"description": "The broadcast.", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Broadcast"}}}},
          "404": {"$ref": "#/components/responses/NotFound"},
          "503": {"$ref": "#/components/responses/Busy"}
        }
      }
    },
    "/v1/users/{user_id}/push-preferences": {
      "get": {
        "operationId": "getUserPreferences", "tags": ["support"], "summary": "A user's preferences and quiet hours, per app.",
        "description": "What `GET /api/user/push-preferences` answers the user, for every configured app, or the one named.",
        "security": [{"apiKey": []}],
        "parameters": [{"$ref": "#/components/parameters/UserID"},
          {"name": "app_type", "in": "query", "schema": {"$ref": "#/components/schemas/AppType"}}],
        "responses": {
          "200": {"description": "Preferences by app.", "content": {"application/json": {
            "schema": {"type": "object", "required": ["user_id", "preferences", "saved"], "properties": {
              "user_id": {"type": "string"},
              "preferences": {"type": "object", "additionalProperties": {"$ref": "#/components/schemas/Preferences"}},
              "saved": {"type": "boolean", "description": "Whether the user saved any preference in these apps: without one, `preferences` are the defaults."}}}}}},
          "400": {"$ref": "#/components/responses/BadRequest"},
          "503": {"$ref": "#/components/responses/Busy"}
        }
      }
    },
    "/v1/users/{user_id}/deliveries": {
      "get": {
        "operationId": "listUserDeliveries", "tags": ["support"], "summary": "A user's deliveries, newest first, a page at a time.",
        "security": [{"apiKey": []}],
        "parameters": [{"$ref": "#/components/parameters/UserID"},
          {"$ref": "#/components/parameters/SupportLimit"}, {"$ref": "#/components/parameters/After"}],
        "responses": {
          "200": {"description": "A page of deliveries.", "content": {"application/json": {
            "schema": {"type": "object", "required": ["user_id", "deliveries"], "properties": {
              "user_id": {"type": "string"},
              "deliveries": {"type": "array", "items": {"allOf": [{"$ref": "#/components/schemas/Delivery"},
                {"type": "object", "required": ["notification_id"], "properties": {"notification_id": {"type": "string"}}}]}},
              "next": {"$ref": "#/components/schemas/Cursor"}}}}}},
          "400": {"$ref": "#/components/responses/BadRequest"},
          "503": {"$ref": "#/components/responses/Busy"}
        }
      }
    },
    "/v1/users/{user_id}/test-push": {
      "post": {
        "operationId": "sendTestPush", "tags": ["support"], "summary": "One test alert to one of the user's active iOS tokens.",
        "description": "It goes through the outbox like any notification (type `test`; preferences and quiet hours do not apply), so its answer is in the log: follow it with `GET /v1/deliveries?apns_id=`.",
        "security": [{"apiKey": []}],
        "parameters": [{"$ref": "#/components/parameters/UserID"}],
        "requestBody": {"required": true, "content": {"application/json": {
          "schema": {"type": "object", "required": ["device_id"], "additionalProperties": false, "properties": {
            "device_id": {"type": "integer", "description": "A token's `id` from `GET /v1/users/{user_id}/device-tokens`."},
            "alert": {"type": ["string", "null"], "minLength": 1, "maxLength": 256, "pattern": "^[^\\u0000-\\u001f]+$"}}},
          "example": {"device_id": 1, "alert": "Checking your notifications"}}}},
        "responses": {
          "202": {"description": "Accepted: the delivery is in the outbox.", "content": {"application/json": {
            "schema": {"type": "object", "required": ["notification_id", "apns_id", "device_id"], "properties": {
              "notification_id": {"type": "string"}, "apns_id": {"type": "string"}, "device_id": {"type": "integer"}}}}},
            "links": {"readDelivery": {"operationId": "getDelivery", "parameters": {"apns_id": "$response.body#/apns_id"}}}},
          "404": {"$ref": "#/components/responses/NotFound"},
          "409": {"$ref": "#/components/responses/Conflict"},
          "503": {"$ref": "#/components/responses/Busy"}
        }
      }
    },
    "/v1/scheduled-notifications": {
      "get": {
        "operationId": "listScheduledNotifications", "tags": ["support"], "summary": "Scheduled notifications still to go, soonest first.",
        "description": "Those waiting for their `send_at` (and any a worker is fanning out now), of one app or all. Cancel one with `DELETE /v1/notifications/{id}`.",
        "security": [{"apiKey": []}],
        "parameters": [
          {"name": "app_type", "in": "query", "schema": {"$ref": "#/components/schemas/AppType"}},
          {"$ref": "#/components/parameters/SupportLimit"}, {"$ref": "#/components/parameters/TimeAfter"}],
        "responses": {
          "200": {"description": "A page of scheduled notifications.", "content": {"application/json": {
            "schema": {"type": "object", "required": ["notifications"], "properties": {
              "notifications": {"type": "array", "items": {"$ref": "#/components/schemas/ScheduledNotification"}},
              "next": {"$ref": "#/components/schemas/TimeCursor"}}},
            "example": {"notifications": [{"notification_id": "6f0b8c2e-3d1a-4b5c-9e7f-1a2b3c4d5e6f", "type": "eventReminder", "state": "scheduled", "send_at": "2026-03-08T09:00:00.000Z", "created_at": "2026-03-07T18:00:00.000Z", "schedule_key": "reminder-tour-1", "app_type": "travel", "content": {"title": "Tomorrow", "body": "Walking tour at 09:00", "entity_type": null, "entity_title": null}, "waiting": {"reason": "scheduled", "until": "2026-03-08T09:00:00.000Z"}}]}}}},
          "400": {"$ref": "#/components/responses/BadRequest"},
          "503": {"$ref": "#/components/responses/Busy"}
        }
      }
    },
    "/v1/deactivated-device-tokens": {
      "get": {
        "operationId": "listDeactivatedDeviceTokens", "tags": ["support"], "summary": "Tokens deactivated lately, most recent first, with the reason.",
        "security": [{"apiKey": []}],
        "parameters": [
          {"name": "hours", "in": "query", "description": "The window: 1 to 2,160 hours (default 168, a week).", "schema": {"type": "integer", "minimum": 1, "maximum": 2160}},
          {"$ref": "#/components/parameters/SupportLimit"}, {"$ref": "#/components/parameters/TimeAfter"}],
        "responses": {
          "200": {"description": "A page of tokens.", "content": {"application/json": {
            "schema": {"type": "object", "required": ["hours", "tokens"], "properties": {
              "hours": {"type": "integer"},
              "tokens": {"type": "array", "items": {"$ref": "#/components/schemas/SupportDevice"}},
              "next": {"$ref": "#/components/schemas/TimeCursor"}}}}}},
          "400": {"$ref": "#/components/responses/BadRequest"},
          "503": {"$ref": "#/components/responses/Busy"}
        }
      }
    },
    "/v1/stats/deliveries": {
      "get": {
        "operationId": "deliveryStats", "tags": ["support"], "summary": "This process's final answers from APNs, a count a second.",
        "description": "Oldest first, ending at `end` (now); in memory since the process started, so each instance counts its own.",
        "security": [{"apiKey": []}],
        "parameters": [{"name": "seconds", "in": "query", "description": "1 to 3,600 (default 3,600).", "schema": {"type": "integer", "minimum": 1, "maximum": 3600}}],
        "responses": {
          "200": {"description": "Counts per second.", "content": {"application/json": {
            "schema": {"type": "object", "required": ["end", "seconds", "delivered", "failed", "failed_by_reason"], "properties": {
              "end": {"$ref": "#/components/schemas/Timestamp"}, "seconds": {"type": "integer"},
              "delivered": {"type": "array", "items": {"type": "integer", "minimum": 0}},
              "failed": {"type": "array", "items": {"type": "integer", "minimum": 0}},
              "failed_by_reason": {"type": "object", "additionalProperties": {"type": "integer", "minimum": 0}}}}}}},
          "400": {"$ref": "#/components/responses/BadRequest"}
        }
      }
    },
    "/console": {
      "get": {
        "operationId": "console", "tags": ["support"], "summary": "The support console's page (absent with `console: false`).",
        "description": "Static; it holds no data and needs no credential. Sign-in is an API key, which the page sends as the bearer on the documented routes.",
        "security": [],
        "responses": {"200": {"description": "The page.", "content": {"text/html": {"schema": {"type": "string"}}}}}
      }
    },
    "/console/console.js": {
      "get": {
        "operationId": "consoleScript", "tags": ["support"], "summary": "The console's script.", "security": [],
        "responses": {"200": {"description": "The script.", "content": {"text/javascript": {"schema": {"type": "string"}}}}}
      }
    },
    "/console/console.css": {
      "get": {
        "operationId": "consoleStyle", "tags": ["support"], "summary": "The console's style sheet.", "security": [],
        "responses": {"200": {"description": "The style sheet.", "content": {"text/css": {"schema": {"type": "string"}}}}}
      }
    },
    "/v1/api-key": {
      "get": {
        "operationId": "getAPIKey", "tags": ["support"], "summary": "What the calling API key may do.",
        "description": "Its name, role, apps (`*`: every app) and the permissions the role gives. The console shows only what these allow.",
        "security": [{"apiKey": []}],
        "responses": {
          "200": {"description": "The key.", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/APIKey"},
            "example": {"name": "billing-worker", "role": "send", "apps": ["staff"], "permissions": ["read", "send"]}}}}
        }
      }
    },
    "/v1/audit": {
      "get": {
        "operationId": "listAuditEntries", "tags": ["support"], "summary": "Who created, cancelled or changed what (an admin key).",
        "description": "Newest first. Every call that creates, cancels or changes something (any method but GET on `/v1/`, and the apps' token and preference changes) is recorded once its answer is known, refusals included: the key's name (or `user:` and the app user's id), the method and path, the app, what it created, the status and the caller's address. Never a secret or a payload. Kept as long as the delivery log (`retention.days`).",
        "security": [{"apiKey": []}],
        "parameters": [{"$ref": "#/components/parameters/Limit"}, {"$ref": "#/components/parameters/After"}],
        "responses": {
          "200": {"description": "A page of entries.", "content": {"application/json": {
            "schema": {"type": "object", "required": ["entries"], "properties": {
              "entries": {"type": "array", "items": {"$ref": "#/components/schemas/AuditEntry"}},
              "next": {"$ref": "#/components/schemas/Cursor"}}}}}},
          "400": {"$ref": "#/components/responses/BadRequest"},
          "503": {"$ref": "#/components/responses/Busy"}
        }
      }
    },
    "/v1/webhook-events": {
      "get": {
        "operationId": "listWebhookEvents", "tags": ["backend"], "summary": "Webhook events in the order they were written, a page at a time.",
        "description": "`state=failed` lists those that never got through.",
        "security": [{"apiKey": []}],
        "parameters": [
          {"name": "state", "in": "query", "schema": {"enum": ["pending", "delivered", "failed"]}},
          {"$ref": "#/components/parameters/Limit"}, {"$ref": "#/components/parameters/After"}
        ],
        "responses": {
          "200": {"description": "A page of events.", "content": {"application/json": {
            "schema": {"type": "object", "required": ["success", "events"], "properties": {
              "success": {"const": true},
              "events": {"type": "array", "items": {"$ref": "#/components/schemas/WebhookEvent"}},
              "next": {"$ref": "#/components/schemas/Cursor"}}}}}},
          "400": {"$ref": "#/components/responses/BadRequest"},
          "503": {"$ref": "#/components/responses/Busy"}
        }
      }
    }
  },
  "components": {
    "securitySchemes": {
      "apiKey": {"type": "http", "scheme": "bearer", "description": "A backend's API key: one line of the config's `api_keys_file`, `NAME ROLE APPS KEY` (a bare key is an `admin` key for every app). Its role and apps decide what it may do (403 otherwise); `GET /v1/api-key` says."},
      "userJWT": {"type": "http", "scheme": "bearer", "bearerFormat": "JWT", "description": "The app user's HS256 JWT, signed with the config's `user_jwt_secret_file` secret: `sub` is the user id, `exp` is required, `company_id` optional; `aud` and `iss` are checked when the config's `user_jwt` names them (Supabase's tokens work as they are)."}
    },
    "parameters": {
      "UserID": {"name": "user_id", "in": "path", "required": true, "schema": {"$ref": "#/components/schemas/Identifier"}, "example": "staff-1"},
      "NotificationID": {"name": "id", "in": "path", "required": true, "schema": {"type": "string", "minLength": 1}, "example": "6f0b8c2e-3d1a-4b5c-9e7f-1a2b3c4d5e6f"},
      "PreferenceAppType": {"name": "appType", "in": "query", "description": "The app whose preferences: default the app of the user's most recent registration, else the first configured app.", "schema": {"$ref": "#/components/schemas/AppType"}, "example": "staff"},
      "Limit": {"name": "limit", "in": "query", "description": "Page size: 1 to 10,000 (default 1,000).", "schema": {"type": "integer", "minimum": 1, "maximum": 10000}},
      "After": {"name": "after", "in": "query", "description": "The previous page's `next`.", "schema": {"$ref": "#/components/schemas/Cursor"}},
      "SupportLimit": {"name": "limit", "in": "query", "description": "Page size: 1 to 500 (default 50); each item is counted.", "schema": {"type": "integer", "minimum": 1, "maximum": 500}},
      "TimeAfter": {"name": "after", "in": "query", "description": "The previous page's `next`.", "schema": {"$ref": "#/components/schemas/TimeCursor"}},
      "IdempotencyKey": {"name": "Idempotency-Key", "in": "header", "description": "A retry sent with the same key gets the first request's status and body (with `Idempotent-Replayed: true`) and creates nothing new. The same key with another body is a 422.", "schema": {"type": "string", "minLength": 1, "maxLength": 255, "pattern": "^[\\x20-\\x7e]+$"}}
    },
    "headers": {
      "IdempotentReplayed": {"description": "`true` on an answer replayed for a repeated Idempotency-Key.", "schema": {"const": "true"}}
    },
    "responses": {
      "BadRequest": {"description": "The request is malformed or refused; nothing was stored.", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}, "example": {"success": false, "error": "platform must be \"ios\" or \"android\""}}}},
      "Forbidden": {"description": "The API key's role does not allow this operation (`read` reads; `support` reads and sends test pushes; `send` reads, creates and cancels; `admin` does everything and reads the audit log), or its apps do not include the app the request acts for. Nothing was read or changed.", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}, "example": {"success": false, "error": "the API key 'reports' (role read) may not create or cancel work"}}}},
      "Unauthorized": {"description": "No bearer credential, or not one this route takes.", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}, "example": {"success": false, "error": "invalid API key"}}}},
      "NotFound": {"description": "Not found (or not the user's).", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}, "example": {"success": false, "error": "notification not found"}}}},
      "Timeout": {"description": "The body did not arrive in time.", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}},
      "Conflict": {"description": "The request conflicts with what is stored (a token of the other kind, another user's activity, a notification too late to cancel, a duplicate still in progress).", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}},
      "TooLarge": {"description": "The body is larger than the server's limit (`max_body_bytes`).", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}},
      "KeyReused": {"description": "The Idempotency-Key was already used for a different request.", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}},
      "APNsRefused": {"description": "APNs refused the channel operation: its reason and status are given.", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}, "example": {"success": false, "error": "APNs refused to create the channel: FeatureNotEnabled", "reason": "FeatureNotEnabled", "apns_status": 400}}}},
      "Busy": {"description": "The database is busy (or, for channels, APNs did not answer): retry after `Retry-After` seconds.", "headers": {"Retry-After": {"schema": {"type": "string", "pattern": "^[0-9]+$"}}}, "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}, "example": {"success": false, "error": "the database is busy; try again shortly"}}}}
    },
    "links": {
      "ReadChannel": {"operationId": "getChannel", "parameters": {"app_type": "$response.body#/app_type", "entity_type": "$response.body#/entity_type", "entity_id": "$response.body#/entity_id", "environment": "$response.body#/environment"}},
      "ChannelForApp": {"operationId": "liveActivityChannel", "parameters": {"appType": "$response.body#/app_type", "entityType": "$response.body#/entity_type", "entityId": "$response.body#/entity_id", "environment": "$response.body#/environment"}},
      "DeleteChannel": {"operationId": "deleteChannel", "parameters": {"app_type": "$response.body#/app_type", "entity_type": "$response.body#/entity_type", "entity_id": "$response.body#/entity_id", "environment": "$response.body#/environment"}},
      "BroadcastToChannel": {"operationId": "broadcast", "parameters": {"app_type": "$response.body#/app_type", "entity_type": "$response.body#/entity_type", "entity_id": "$response.body#/entity_id"}, "requestBody": {"event": "update", "environment": "$response.body#/environment", "content_state": {"status": "boarding"}}}
    },
    "schemas": {
      "Error": {"type": "object", "required": ["success", "error"], "properties": {
        "success": {"const": false}, "error": {"type": "string"},
        "reason": {"type": ["string", "null"], "description": "APNs' reason (channel operations)."},
        "apns_status": {"type": ["integer", "null"], "description": "APNs' status (channel operations)."}}},
      "Success": {"type": "object", "required": ["success", "message"], "properties": {"success": {"const": true}, "message": {"type": "string"}}},
      "Timestamp": {"type": ["string", "null"], "format": "date-time", "examples": ["2026-11-22T21:28:00.123Z"]},
      "Cursor": {"type": "string", "pattern": "^[0-9]{1,19}$", "description": "Opaque: pass it back as `after`."},
      "TimeCursor": {"type": "string", "pattern": "^[0-9]{1,18}\\.[^\\u0000-\\u001f\\u007f]{1,256}$", "description": "Opaque: pass it back as `after`."},
      "SupportDevice": {"type": "object", "required": ["id", "user_id", "app_type", "platform", "environment", "token", "device_name", "os_version", "app_version", "active", "deactivated_reason", "deactivated_at", "last_used_at", "registered_at", "created_at"], "properties": {
        "id": {"type": "integer"}, "user_id": {"type": "string"}, "app_type": {"type": "string"},
        "platform": {"enum": ["ios", "android"]}, "environment": {"enum": ["sandbox", "production"]}, "token": {"type": "string"},
        "device_name": {"type": ["string", "null"]}, "os_version": {"type": ["string", "null"]}, "app_version": {"type": ["string", "null"]},
        "active": {"type": "boolean"},
        "deactivated_reason": {"type": ["string", "null"], "description": "`unregistered` (the app logged out), `replaced` (newer tokens), or APNs' reason (`Unregistered`, `BadDeviceToken`, …)."},
        "deactivated_at": {"$ref": "#/components/schemas/Timestamp"}, "last_used_at": {"$ref": "#/components/schemas/Timestamp"},
        "registered_at": {"$ref": "#/components/schemas/Timestamp"}, "created_at": {"$ref": "#/components/schemas/Timestamp"}}},
      "AppType": {"type": "string", "description": "An app the server's config names (`apps[].app_type`)."},
      "EnvironmentName": {"enum": ["sandbox", "production"]},
      "Environment": {"enum": ["sandbox", "production", null], "description": "Default production."},
      "Identifier": {"type": "string", "minLength": 1, "maxLength": 256, "pattern": "^[^\\u0000-\\u001f\\u007f]+$", "description": "1 to 256 bytes, no control characters."},
      "OptionalIdentifier": {"anyOf": [{"$ref": "#/components/schemas/Identifier"}, {"type": "null"}]},
      "PushToken": {"type": "string", "pattern": "^([0-9A-Fa-f]{2}){32,100}$", "description": "64 to 200 hex digits; stored in lower case."},
      "ShortText": {"type": ["string", "null"], "maxLength": 256},
      "Text": {"type": ["string", "null"], "maxLength": 1024},
      "UnixSeconds": {"type": ["integer", "null"], "minimum": 0, "maximum": 9200000000000000000, "description": "Whole seconds since 1970, however the number is written (1282, 1282.0 or 1.282e3)."},
      "Time": {"anyOf": [{"type": "string", "format": "date-time", "maxLength": 64}, {"type": "number", "minimum": 0, "exclusiveMaximum": 100000000000}, {"type": "null"}], "description": "RFC 3339 (ISO-8601 with its offset as ±HH:MM or Z, 1970 or later, a real date), or UNIX seconds."},
      "UserIDs": {"type": ["array", "null"], "minItems": 1, "maxItems": 10000, "items": {"$ref": "#/components/schemas/Identifier"}},
      "DeviceTokenBody": {"type": "object", "required": ["deviceToken"], "properties": {"deviceToken": {"$ref": "#/components/schemas/PushToken"}}},
      "PushTokenBody": {"type": "object", "required": ["pushToken"], "properties": {"pushToken": {"$ref": "#/components/schemas/PushToken"}}},
      "DeviceRegistration": {"type": "object", "required": ["deviceToken", "platform", "appType"], "properties": {
        "deviceToken": {"$ref": "#/components/schemas/PushToken"},
        "platform": {"enum": ["ios", "android"]},
        "appType": {"$ref": "#/components/schemas/AppType"},
        "environment": {"$ref": "#/components/schemas/Environment"},
        "deviceName": {"$ref": "#/components/schemas/ShortText"},
        "osVersion": {"$ref": "#/components/schemas/ShortText"},
        "appVersion": {"$ref": "#/components/schemas/ShortText"}}},
      "BackendDeviceRegistration": {"allOf": [{"$ref": "#/components/schemas/DeviceRegistration"}, {"type": "object", "properties": {
        "company_id": {"$ref": "#/components/schemas/OptionalIdentifier"}}}]},
      "BulkDeviceRegistration": {"allOf": [{"$ref": "#/components/schemas/DeviceRegistration"}, {"type": "object", "required": ["user_id"], "properties": {
        "user_id": {"$ref": "#/components/schemas/Identifier"},
        "company_id": {"$ref": "#/components/schemas/OptionalIdentifier"}}}]},
      "Device": {"type": "object", "required": ["id", "platform", "app_type", "device_name", "os_version", "app_version", "last_used_at", "created_at"], "properties": {
        "id": {"type": "integer"}, "platform": {"enum": ["ios", "android"]}, "app_type": {"type": "string"},
        "device_name": {"type": ["string", "null"]}, "os_version": {"type": ["string", "null"]}, "app_version": {"type": ["string", "null"]},
        "last_used_at": {"$ref": "#/components/schemas/Timestamp"}, "created_at": {"$ref": "#/components/schemas/Timestamp"}}},
      "Preferences": {"type": "object", "description": "`notificationsEnabled` and the app's toggles (booleans), and the quiet-hours keys.",
        "properties": {
          "notificationsEnabled": {"type": "boolean"},
          "quietHoursEnabled": {"type": "boolean"},
          "quietHoursStart": {"type": "string", "pattern": "^([01][0-9]|2[0-3]):[0-5][0-9]$", "examples": ["22:00"]},
          "quietHoursEnd": {"type": "string", "pattern": "^([01][0-9]|2[0-3]):[0-5][0-9]$", "examples": ["08:00"]},
          "timeZone": {"type": "string", "description": "An IANA time zone (\"Europe/London\").", "examples": ["Europe/London"]}},
        "additionalProperties": {"type": "boolean"}},
      "LiveActivityRegistration": {"type": "object", "required": ["pushToken", "appType", "attributesType"], "properties": {
        "pushToken": {"$ref": "#/components/schemas/PushToken"},
        "appType": {"$ref": "#/components/schemas/AppType"},
        "attributesType": {"$ref": "#/components/schemas/Identifier"},
        "activityId": {"$ref": "#/components/schemas/OptionalIdentifier"},
        "environment": {"$ref": "#/components/schemas/Environment"}}},
      "LiveActivityToken": {"type": "object", "required": ["id", "kind", "app_type", "attributes_type", "activity_id", "environment", "last_used_at", "created_at"], "properties": {
        "id": {"type": "integer"}, "kind": {"enum": ["start", "update"]}, "app_type": {"type": "string"},
        "attributes_type": {"type": "string"}, "activity_id": {"type": ["string", "null"]}, "environment": {"enum": ["sandbox", "production"]},
        "last_used_at": {"$ref": "#/components/schemas/Timestamp"}, "created_at": {"$ref": "#/components/schemas/Timestamp"}}},
      "NotificationEvent": {"type": "object", "required": ["apns_id", "event"], "properties": {
        "apns_id": {"type": "string", "pattern": "^[0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12}$"},
        "event": {"enum": ["received", "opened"]},
        "at": {"$ref": "#/components/schemas/Time"}}},
      "Alert": {"anyOf": [
        {"type": "string"},
        {"type": "object", "properties": {"title": {"type": "string"}, "subtitle": {"type": "string"}, "body": {"type": "string"}},
          "patternProperties": {"-args$": {"type": ["string", "array"]}}, "additionalProperties": {"type": "string"}},
        {"type": "null"}]},
      "NotificationRequest": {"type": "object", "required": ["type", "app_type"], "description": "One of `user_ids` or `company_id`, and something to send (`alert`, `badge`, `sound` or `data`).", "properties": {
        "type": {"type": "string", "minLength": 1, "maxLength": 64, "pattern": "^[^\\u0000-\\u001f\\u007f]+$"},
        "app_type": {"$ref": "#/components/schemas/AppType"},
        "user_ids": {"$ref": "#/components/schemas/UserIDs"},
        "company_id": {"$ref": "#/components/schemas/OptionalIdentifier"},
        "entity_type": {"$ref": "#/components/schemas/Text"},
        "entity_id": {"$ref": "#/components/schemas/Text"},
        "entity_title": {"$ref": "#/components/schemas/Text"},
        "alert": {"$ref": "#/components/schemas/Alert"},
        "badge": {"anyOf": [{"type": "integer", "minimum": 0}, {"type": "object", "additionalProperties": {"type": "integer", "minimum": 0}}, {"type": "null"}], "description": "One count for all, or per user id."},
        "sound": {"type": ["string", "object", "null"]},
        "mutable_content": {"type": ["boolean", "null"]},
        "thread_id": {"$ref": "#/components/schemas/Text"},
        "collapse_id": {"anyOf": [{"type": "string", "maxLength": 1024, "pattern": "^[^\\u0000-\\u001f\\u007f]*$"}, {"type": "null"}]},
        "data": {"type": ["object", "null"], "description": "Custom keys for the payload (deep links).", "propertyNames": {"not": {"enum": ["aps", "type", "entity_type", "entity_id", "entity_title"]}}},
        "priority": {"enum": ["low", "normal", "high", "critical", 10, 5, 1, null]},
        "expiration": {"$ref": "#/components/schemas/UnixSeconds"},
        "send_at": {"$ref": "#/components/schemas/Time"},
        "schedule_key": {"$ref": "#/components/schemas/OptionalIdentifier"}}},
      "NotificationAccepted": {"type": "object", "required": ["notification_id"], "properties": {
        "notification_id": {"type": "string"},
        "deliveries": {"type": "integer", "minimum": 0},
        "skipped": {"type": "object", "additionalProperties": {"type": "integer", "minimum": 0}},
        "state": {"type": "string"},
        "send_at": {"$ref": "#/components/schemas/Timestamp"},
        "schedule_key": {"type": "string"},
        "superseded": {"type": "string"}}},
      "Delivery": {"type": "object", "required": ["user_id", "token", "environment", "state", "apns_id", "status", "reason", "timestamp", "attempts", "finished_at"], "properties": {
        "user_id": {"type": "string"}, "token": {"type": "string"}, "environment": {"enum": ["sandbox", "production"]},
        "state": {"type": "string", "examples": ["pending", "delivered", "failed", "batched", "superseded", "cancelled"]},
        "apns_id": {"type": "string"}, "status": {"type": ["integer", "null"]}, "reason": {"type": ["string", "null"]},
        "timestamp": {"$ref": "#/components/schemas/Timestamp"}, "attempts": {"type": "integer", "minimum": 0},
        "finished_at": {"$ref": "#/components/schemas/Timestamp"},
        "not_before": {"$ref": "#/components/schemas/Timestamp"}, "batched": {"type": "integer"}, "carried_by": {"type": "string"},
        "received_at": {"$ref": "#/components/schemas/Timestamp"}, "opened_at": {"$ref": "#/components/schemas/Timestamp"},
        "waiting": {"$ref": "#/components/schemas/Waiting"}}},
      "Waiting": {"type": "object", "required": ["reason"], "description": "Why a pending delivery (or a scheduled notification) has not gone yet, derived from the outbox, the delivery's attempts and batching, and the user's saved time zone and quiet hours. `sending`: a worker holds it `until` its lease ends. `quiet_hours`: held `until` the user's quiet hours end, `local_until` in `time_zone` (the user's zone). `batching`: a batching window's send, `until` the window closes. `retry_backoff`: no final answer yet, tried again `until` then (`attempts` counts the tries). `scheduled`: a scheduled notification, `until` its `send_at`. `due`: may go now, due `since`. `late`: due `since` more than a minute ago: the outbox keeps it past its time (no worker running, or one falling behind).", "properties": {
        "reason": {"enum": ["sending", "quiet_hours", "batching", "retry_backoff", "scheduled", "due", "late"]},
        "until": {"$ref": "#/components/schemas/Timestamp"},
        "since": {"$ref": "#/components/schemas/Timestamp"},
        "local_until": {"type": "string", "pattern": "^[0-2][0-9]:[0-5][0-9]$", "description": "Quiet hours only: the end as the user's clock reads it, HH:mm."},
        "time_zone": {"type": "string", "description": "Quiet hours only: the user's IANA time zone."}}},
      "NotificationContent": {"type": "object", "required": ["title", "body", "entity_type", "entity_title"], "description": "What the notification says: its alert's title and body (a string alert is a body), and the entity it is about, as its payload (or a scheduled one's request) has them.", "properties": {
        "title": {"type": ["string", "null"]}, "body": {"type": ["string", "null"]},
        "entity_type": {"type": ["string", "null"]}, "entity_title": {"type": ["string", "null"]}}},
      "ScheduledNotification": {"type": "object", "required": ["notification_id", "type", "state", "send_at", "created_at", "app_type"], "properties": {
        "notification_id": {"type": "string"}, "type": {"type": "string"},
        "state": {"enum": ["scheduled", "sending"]},
        "send_at": {"$ref": "#/components/schemas/Timestamp"}, "created_at": {"$ref": "#/components/schemas/Timestamp"},
        "schedule_key": {"type": "string"}, "app_type": {"type": "string"},
        "content": {"$ref": "#/components/schemas/NotificationContent"},
        "waiting": {"$ref": "#/components/schemas/Waiting"}}},
      "NotificationLog": {"type": "object", "required": ["notification_id", "type", "summary", "deliveries"], "properties": {
        "notification_id": {"type": "string"}, "type": {"type": "string"},
        "entity_id": {"type": ["string", "null"]},
        "state": {"type": "string", "description": "Scheduled notifications only: scheduled, cancelled, superseded, failed."},
        "send_at": {"$ref": "#/components/schemas/Timestamp"}, "schedule_key": {"type": "string"},
        "superseded_by": {"type": "string"}, "finished_at": {"$ref": "#/components/schemas/Timestamp"}, "error": {"type": "string"},
        "created_at": {"$ref": "#/components/schemas/Timestamp", "description": "When it was asked for (a scheduled one: the request's time, not its send time)."},
        "sent_at": {"$ref": "#/components/schemas/Timestamp", "description": "A scheduled notification that went: when it was fanned out."},
        "app_type": {"type": "string", "description": "Scheduled notifications not fanned out: their app."},
        "content": {"$ref": "#/components/schemas/NotificationContent"},
        "waiting": {"$ref": "#/components/schemas/Waiting"},
        "summary": {"type": "object", "required": ["pending", "delivered", "failed"], "additionalProperties": {"type": "integer", "minimum": 0}},
        "deliveries": {"type": "array", "items": {"$ref": "#/components/schemas/Delivery"}},
        "next": {"$ref": "#/components/schemas/Cursor"}}},
      "LiveActivityRequest": {"type": "object", "required": ["app_type", "event"], "properties": {
        "app_type": {"$ref": "#/components/schemas/AppType"},
        "event": {"enum": ["start", "update", "end"]},
        "attributes_type": {"$ref": "#/components/schemas/OptionalIdentifier"},
        "activity_id": {"$ref": "#/components/schemas/OptionalIdentifier"},
        "user_ids": {"$ref": "#/components/schemas/UserIDs"},
        "timestamp": {"$ref": "#/components/schemas/UnixSeconds"},
        "content_state": {"type": ["object", "null"]},
        "attributes": {"type": ["object", "null"]},
        "stale_date": {"$ref": "#/components/schemas/UnixSeconds"},
        "dismissal_date": {"$ref": "#/components/schemas/UnixSeconds"},
        "relevance_score": {"type": ["number", "null"]},
        "alert": {"anyOf": [{"type": "string"}, {"type": "object", "properties": {"title": {"type": "string"}, "subtitle": {"type": "string"}, "body": {"type": "string"}}, "additionalProperties": false}, {"type": "null"}]},
        "input_push_token": {"type": ["boolean", "null"]},
        "priority": {"enum": [10, 5, null]},
        "expiration": {"$ref": "#/components/schemas/UnixSeconds"},
        "send_at": {"$ref": "#/components/schemas/Time"},
        "schedule_key": {"$ref": "#/components/schemas/OptionalIdentifier"}}},
      "ChannelRequest": {"type": "object", "required": ["app_type", "entity_type", "entity_id"], "properties": {
        "app_type": {"$ref": "#/components/schemas/AppType"},
        "entity_type": {"$ref": "#/components/schemas/Identifier"},
        "entity_id": {"$ref": "#/components/schemas/Identifier"},
        "environment": {"$ref": "#/components/schemas/Environment"},
        "storage_policy": {"enum": [0, 1, null], "description": "0: no message stored; 1 (default): the most recent stored."},
        "audience": {"anyOf": [{"type": "null"}, {"type": "object", "additionalProperties": false, "properties": {
          "public": {"type": "boolean"},
          "users": {"type": "array", "maxItems": 10000, "items": {"$ref": "#/components/schemas/Identifier"}},
          "company_id": {"$ref": "#/components/schemas/OptionalIdentifier"}}}],
          "description": "Who may look the channel up from the app: `{\"public\": true}`, or users and/or a company. Absent: a new channel has none."}}},
      "Channel": {"type": "object", "required": ["channel_id", "app_type", "environment", "entity_type", "entity_id", "storage_policy", "created_at"], "properties": {
        "channel_id": {"type": "string"}, "app_type": {"type": "string"}, "environment": {"enum": ["sandbox", "production"]},
        "entity_type": {"type": "string"}, "entity_id": {"type": "string"}, "storage_policy": {"enum": [0, 1]},
        "created_at": {"$ref": "#/components/schemas/Timestamp"}, "created": {"type": "boolean"}}},
      "BroadcastRequest": {"type": "object", "required": ["event"], "properties": {
        "event": {"enum": ["update", "end"]},
        "environment": {"$ref": "#/components/schemas/Environment"},
        "content_state": {"type": ["object", "null"]},
        "timestamp": {"$ref": "#/components/schemas/UnixSeconds"},
        "stale_date": {"$ref": "#/components/schemas/UnixSeconds"},
        "dismissal_date": {"$ref": "#/components/schemas/UnixSeconds"},
        "relevance_score": {"type": ["number", "null"]},
        "alert": {"anyOf": [{"type": "string"}, {"type": "object", "properties": {"title": {"type": "string"}, "subtitle": {"type": "string"}, "body": {"type": "string"}}, "additionalProperties": false}, {"type": "null"}]},
        "priority": {"enum": [10, 5, 1, null]},
        "expiration": {"$ref": "#/components/schemas/UnixSeconds"}}},
      "Broadcast": {"type": "object", "required": ["broadcast_id", "app_type", "environment", "entity_type", "entity_id", "channel_id", "state", "status", "reason", "attempts", "created_at", "finished_at"], "properties": {
        "broadcast_id": {"type": "string"}, "app_type": {"type": "string"}, "environment": {"enum": ["sandbox", "production"]},
        "entity_type": {"type": "string"}, "entity_id": {"type": "string"}, "channel_id": {"type": "string"},
        "state": {"type": "string"}, "status": {"type": ["integer", "null"]}, "reason": {"type": ["string", "null"]},
        "apns_request_id": {"type": ["string", "null"]}, "apns_unique_id": {"type": ["string", "null"]},
        "attempts": {"type": "integer", "minimum": 0},
        "created_at": {"$ref": "#/components/schemas/Timestamp"}, "finished_at": {"$ref": "#/components/schemas/Timestamp"}}},
      "APIKey": {"type": "object", "required": ["name", "role", "apps", "permissions"], "properties": {
        "name": {"type": "string"}, "role": {"enum": ["read", "support", "send", "admin"]},
        "apps": {"oneOf": [{"const": "*"}, {"type": "array", "items": {"type": "string"}}]},
        "permissions": {"type": "array", "items": {"enum": ["read", "test_push", "send", "admin"]}}}},
      "AuditEntry": {"type": "object", "required": ["at", "actor", "method", "path", "app_type", "target", "status", "remote_address"], "properties": {
        "at": {"$ref": "#/components/schemas/Timestamp"}, "actor": {"type": "string"},
        "method": {"type": "string"}, "path": {"type": "string"},
        "app_type": {"type": ["string", "null"]}, "target": {"type": ["string", "null"]},
        "status": {"type": "integer"}, "remote_address": {"type": ["string", "null"]}}},
      "WebhookEvent": {"type": "object", "required": ["id", "type", "url", "state", "attempts", "created_at"], "properties": {
        "id": {"type": "string"}, "type": {"type": "string"}, "url": {"type": "string"},
        "state": {"enum": ["pending", "delivered", "failed"]}, "attempts": {"type": "integer", "minimum": 0},
        "last_status": {"type": ["integer", "null"]}, "last_error": {"type": ["string", "null"]},
        "created_at": {"$ref": "#/components/schemas/Timestamp"}, "next_attempt_at": {"$ref": "#/components/schemas/Timestamp"},
        "finished_at": {"$ref": "#/components/schemas/Timestamp"}, "data": {}}}
    }
  }
}
"""#

    /// The document as served: compact, with `AppType` listing the apps this
    /// server's config names, so that a generated client (and the tests) know them.
    static func served(appTypes: [String]) -> [UInt8] {
        let appType: JSON = .object([
            ("type", .string("string")),
            ("enum", .array(appTypes.map(JSON.string))),
            ("description", .string("An app this server's config names (`apps[].app_type`).")),
        ])
        return withErrors.replacing(["components", "schemas", "AppType"], with: appType).bytes
    }

    /// `text` parsed, with the implied errors: the same for every server, so made once.
    private static let withErrors: JSON = {
        guard let document = try? JSON.parse(Array(text.utf8)) else {
            preconditionFailure("OpenAPIDocument.text is not JSON")
        }
        return withImpliedErrors(document)
    }()

    /// The errors an operation answers because of its kind, whatever it does: 401
    /// to a missing or wrong credential, where one is needed (a `security` that is
    /// not empty), and 400, 408 and 413 to a body that is not what the operation
    /// takes, comes too slowly or is too large, where it takes one.
    static func impliedErrors(_ operation: JSON) -> [(status: String, response: String)] {
        var errors: [(String, String)] = []
        if case .array(let requirements)? = operation["security"], !requirements.isEmpty {
            errors.append(("401", "Unauthorized"))
            // An API key's role or apps may not cover the operation.
            if requirements.contains(where: { $0["apiKey"] != nil }) { errors.append(("403", "Forbidden")) }
        }
        if operation["requestBody"] != nil {
            errors += [("400", "BadRequest"), ("408", "Timeout"), ("413", "TooLarge")]
        }
        return errors
    }

    /// `document` with each operation's implied errors among its responses, in
    /// the order of their statuses.
    static func withImpliedErrors(_ document: JSON) -> JSON {
        guard case .object(let paths)? = document["paths"] else { return document }
        let methods: Set<String> = ["get", "put", "post", "delete", "patch"]
        let completed = paths.map { path, item -> (String, JSON) in
            guard case .object(let members) = item else { return (path, item) }
            return (path, .object(members.map { method, operation in
                guard methods.contains(method), case .object(var responses)? = operation["responses"] else {
                    return (method, operation)
                }
                for error in impliedErrors(operation) where !responses.contains(where: { $0.0 == error.status }) {
                    responses.append((error.status, .object([("$ref", .string("#/components/responses/\(error.response)"))])))
                }
                responses.sort { $0.0 < $1.0 }
                return (method, operation.replacing(["responses"], with: .object(responses)))
            }))
        }
        return document.replacing(["paths"], with: .object(completed))
    }
}

extension JSON {
    /// This value with the member at `path` (object keys) replaced, or added.
    func replacing(_ path: ArraySlice<String>, with value: JSON) -> JSON {
        guard let key = path.first else { return value }
        guard case .object(var members) = self else { return self }
        if let i = members.firstIndex(where: { $0.0 == key }) {
            members[i].1 = members[i].1.replacing(path.dropFirst(), with: value)
        } else {
            members.append((key, JSON.object([]).replacing(path.dropFirst(), with: value)))
        }
        return .object(members)
    }

    func replacing(_ path: [String], with value: JSON) -> JSON { replacing(path[...], with: value) }
}
