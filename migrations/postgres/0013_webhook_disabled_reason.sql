-- Why an endpoint is disabled, so that `GET /webhooks/{id}` and `plantstore webhooks get`
-- can say it: 'request' (a PATCH), 'gone' (the receiver answered 410) or 'failing' (nothing
-- but failures for --webhook-disable-after). NULL while enabled, and for endpoints disabled
-- before this version, whose reason was not kept.
ALTER TABLE webhook_endpoints ADD COLUMN disabled_reason text
  CHECK (disabled_reason IN ('request', 'gone', 'failing'));
