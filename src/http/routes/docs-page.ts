// The /docs page: Swagger UI, served from this server (no CDN), with two plugins of ours.
//
// Swagger UI is kept over Scalar and Redoc because its "Try it out" sends the request body
// as typed, and its component system lets a plugin replace how answers are shown: it shows
// a JSON answer by JSON.parse and re-stringify, which rounds every id above 2^53 (a plant
// created as 9007199254740993 showed as 9007199254740992). The plugin re-indents JSON with
// lossless-json, the parser the server itself uses, so numbers keep every digit.

/**
 * Files the page loads, by name under /docs/, each with the module it is (resolved with
 * require: lossless-json's "require" entry is its browser-ready UMD bundle).
 */
export const docsAssets: Record<string, { type: string; from: string }> = {
  'swagger-ui.css': { type: 'text/css; charset=utf-8', from: 'swagger-ui-dist/swagger-ui.css' },
  'swagger-ui-bundle.js': {
    type: 'text/javascript; charset=utf-8',
    from: 'swagger-ui-dist/swagger-ui-bundle.js',
  },
  'lossless-json.js': {
    type: 'text/javascript; charset=utf-8',
    from: 'lossless-json',
  },
};

// Browser code, run as is: kept small, and free of anything but Swagger UI's plugin API
// and the LosslessJSON global of the UMD bundle above.
const plugins = `
// JSON answers shown digit for digit. The content type handed on is one Swagger UI shows
// as text (no "json" in it), so it does not JSON.parse the body again.
const exactJson = () => ({
  wrapComponents: {
    responseBody: (Original, system) => (props) => {
      const { content, contentType } = props;
      if (typeof content !== 'string' || !/json/i.test(contentType || '')) {
        return system.React.createElement(Original, props);
      }
      let shown = content;
      try {
        shown = LosslessJSON.stringify(LosslessJSON.parse(content), null, 2);
      } catch (error) {
        // Not JSON after all: shown as it came.
      }
      return system.React.createElement(Original, {
        ...props,
        content: shown,
        contentType: 'application/vnd.plantstore.exact',
      });
    },
  },
});

// The reference lists what a reader calls. CORS preflights, this page's own assets and the
// redirects to it stay in /openapi.json, but are not operations to scroll past here.
const hiddenPaths = ['/docs/{file}', '/', '/docs/'];
const readerOperations = () => ({
  statePlugins: {
    spec: {
      wrapSelectors: {
        taggedOperations: (original) => (...args) =>
          original(...args)
            .map((tag) =>
              tag.update('operations', (operations) =>
                operations.filter(
                  (op) => op.get('method') !== 'options' && !hiddenPaths.includes(op.get('path')),
                ),
              ),
            )
            .filter((tag) => tag.get('operations').size > 0),
      },
    },
  },
});

window.ui = SwaggerUIBundle({
  url: '/openapi.json',
  dom_id: '#ui',
  deepLinking: true,
  plugins: [exactJson, readerOperations],
});
`;

// The page's icon, a leaf, in the page itself: a browser that finds none asks for
// /favicon.ico on every load, and the 404 is an error in its console.
const icon =
  "<svg xmlns='http://www.w3.org/2000/svg' viewBox='0 0 32 32'>" +
  "<path d='M16 30V15' stroke='#2e7d32' stroke-width='2.5'/>" +
  "<path d='M16 17C16 8 22 3 30 3c0 8-5 14-14 14z' fill='#43a047'/>" +
  "<path d='M16 21C16 14 11 9 3 9c0 7 4 12 13 12z' fill='#66bb6a'/></svg>";

export const docsPage = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>Plant Store API</title>
<link rel="icon" type="image/svg+xml" href="data:image/svg+xml,${encodeURIComponent(icon)}">
<link rel="stylesheet" href="/docs/swagger-ui.css">
</head>
<body>
<div id="ui"></div>
<script src="/docs/swagger-ui-bundle.js"></script>
<script src="/docs/lossless-json.js"></script>
<script>${plugins}</script>
</body>
</html>
`;
