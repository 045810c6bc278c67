import type { FastifyRequest } from 'fastify';
import { ApiError } from '../core/errors.js';
import { parseBearer } from '../core/tokens.js';
import type { TokenService } from '../service/token-service.js';

const REALM = 'Bearer realm="plantstore"';

/**
 * onRequest hook: runs before the body is read, so a request without valid credentials
 * is refused before any of its input is looked at (DESIGN §3, order of checks).
 */
export function authenticate(tokens: TokenService) {
  return async (request: FastifyRequest): Promise<void> => {
    const scope = request.routeOptions.config.operation?.scope;
    if (scope === undefined || scope === null) return;
    const token = parseBearer(request.headers.authorization);
    if (token === undefined) {
      throw new ApiError('missingCredentials', undefined, { 'www-authenticate': REALM });
    }
    const record = await tokens.authenticate(token);
    if (record === undefined) {
      throw new ApiError('invalidToken', undefined, {
        'www-authenticate': `${REALM}, error="invalid_token"`,
      });
    }
    if (!record.scopes.includes(scope)) {
      throw new ApiError('insufficientScope', `This operation needs the scope "${scope}".`, {
        'www-authenticate': `${REALM}, error="insufficient_scope", scope="${scope}"`,
      });
    }
  };
}
