// The layers of src/, checked from the code's own imports by `npm run lint:layers` (part of
// `npm run lint`). Type-only imports count like the others: a type pulls its layer's
// assumptions in as surely as a value does. docs/architecture.md draws the same layers.
//
//   core      the domain: plain data and rules, no I/O
//   api       the contract (operations, schemas, OpenAPI, header parsers); core only
//   store     SQLite and PostgreSQL behind one interface (store/store.ts); core only
//   outbound  the webhook sender and its destination checks; core only
//   service   the operations, over core and the store interface; knows no HTTP
//   http      the Fastify app over api and service
//   server    the runtime: composes all of the above, listens, delivers, stops
//   cli       the commands; the only place that owns the process
//
// Beside src/, the TypeScript client is a package of its own (packages/client,
// @plantstore/client, published apart from the server): cruised from its source, and
// imported by the commands by its name, as its users import it.
//
// Rules that are not about imports (files under 300 lines, only src/cli exits or traps
// signals, no HTTP header names in src/service) are ESLint's, in eslint.config.js.

/**
 * Node modules and packages that do I/O: the domain must work without any of them. Not
 * node:net, whose pure address parsers (isIP, isIPv4) the domain uses.
 */
const IO_MODULES = [
  '^(node:)?(fs|fs/promises|http|https|http2|dns|dgram|tls|child_process|cluster|worker_threads|readline)$',
  '^(fastify|@fastify/|pg|pg-|better-sqlite3|pino|prom-client)',
];

/** @type {import('dependency-cruiser').IConfiguration} */
export default {
  forbidden: [
    {
      name: 'no-cycles',
      comment:
        'A cycle makes the import order decide what is defined when, and no file of the cycle ' +
        'can be read, tested or moved without the others.',
      severity: 'error',
      from: { path: '^(src|bench)/' },
      to: { circular: true },
    },
    {
      name: 'core-is-the-domain',
      comment:
        'core is what every layer shares: importing any other layer would make all of them ' +
        'depend on that one.',
      severity: 'error',
      from: { path: '^src/core/' },
      to: { path: '^src/', pathNot: '^src/core/' },
    },
    {
      name: 'core-does-no-io',
      comment:
        'The domain must run in a unit test with nothing open: no files, sockets, database or ' +
        'framework.',
      severity: 'error',
      from: { path: '^src/core/' },
      to: { path: IO_MODULES },
    },
    {
      name: 'api-is-the-contract',
      comment:
        'The contract (operations, schemas, OpenAPI) is read by the app, the OpenAPI writer and ' +
        'the client generator alike: it can use the domain and nothing that implements it.',
      severity: 'error',
      from: { path: '^src/api/' },
      to: { path: '^src/', pathNot: '^src/(api|core)/' },
    },
    {
      name: 'api-without-fastify',
      comment:
        'The contract must not depend on the framework that serves it, so that the framework ' +
        'can change under an unchanged contract. core neither (core-does-no-io).',
      severity: 'error',
      from: { path: '^src/api/' },
      to: { path: '^(fastify|@fastify/)' },
    },
    {
      name: 'store-over-core-only',
      comment:
        'The store persists the domain for whichever layer calls it; knowing a caller would ' +
        'tie the databases to it.',
      severity: 'error',
      from: { path: '^src/store/' },
      to: { path: '^src/', pathNot: '^src/(store|core)/' },
    },
    {
      name: 'outbound-over-core-only',
      comment:
        'The sender and the destination checks are adapters to the network, as the store is ' +
        'to the database: they know the domain, and the runtime hands them to the services.',
      severity: 'error',
      from: { path: '^src/outbound/' },
      to: { path: '^src/', pathNot: '^src/(outbound|core)/' },
    },
    {
      name: 'service-over-store-interface',
      comment:
        'The services see the store through its interface only, so that they run the same on ' +
        'SQLite, PostgreSQL or a fake, and never the API contract or the app.',
      severity: 'error',
      from: { path: '^src/service/' },
      to: { path: '^src/', pathNot: ['^src/(service|core)/', '^src/store/store\\.ts$'] },
    },
    {
      name: 'service-knows-no-http',
      comment:
        'The services are called by the app and by the CLI alike: HTTP (the framework, the ' +
        'sockets) belongs to http/ and outbound/, whatever the caller.',
      severity: 'error',
      from: { path: '^src/service/' },
      to: { path: ['^(node:)?(http|https|http2|net|dns)$', '^(fastify|@fastify/)'] },
    },
    {
      name: 'http-over-service',
      comment:
        'The app turns requests into service calls: it reaches the store only through the ' +
        'services, the runtime and the commands never.',
      severity: 'error',
      from: { path: '^src/http/' },
      to: { path: '^src/', pathNot: ['^src/(http|service|api|core)/', '^src/store/store\\.ts$'] },
    },
    {
      name: 'http-types-only-from-store',
      comment:
        'The app may name the store interface in a type (the readiness probe), never call it: ' +
        'its writes go through the services.',
      severity: 'error',
      from: { path: '^src/http/' },
      to: { path: '^src/store/store\\.ts$', dependencyTypesNot: ['type-only'] },
    },
    {
      name: 'only-cli-starts-the-server',
      comment:
        'The runtime (compose, serve, cluster) is the outermost layer below the commands: a ' +
        'layer importing it would depend on everything.',
      severity: 'error',
      from: { path: '^src/', pathNot: '^src/(cli|server)/' },
      to: { path: '^src/server/' },
    },
    {
      name: 'nothing-imports-the-cli',
      comment:
        'The commands own the process (arguments, exit codes, signals); what they define for ' +
        'others to use belongs in a lower layer.',
      severity: 'error',
      from: { path: '^src/', pathNot: '^src/cli/' },
      to: { path: '^src/cli/' },
    },
    {
      name: 'cli-reaches-the-app-through-server',
      comment:
        'The commands start the runtime; they do not wire the app or its adapters themselves, ' +
        'so that there is one composition of them (server/compose.ts).',
      severity: 'error',
      from: { path: '^src/cli/' },
      to: { path: '^src/(http|outbound)/' },
    },
    {
      name: 'client-is-standalone',
      comment:
        'The client is published on its own (@plantstore/client) with lossless-json as its one ' +
        'dependency, and runs wherever fetch does: its code and its declarations reach neither ' +
        'into the server nor into Node.js. It follows the contract by generation ' +
        '(npm run client), not by import.',
      severity: 'error',
      from: { path: '^packages/client/src/' },
      to: { pathNot: ['^packages/client/src/', '^node_modules/lossless-json/'] },
    },
    {
      name: 'only-cli-uses-the-client',
      comment:
        'The server never calls itself over HTTP; the plants commands are the client’s one ' +
        'user inside src/.',
      severity: 'error',
      from: { path: '^src/', pathNot: '^src/cli/' },
      to: { path: '^packages/client/' },
    },
    {
      name: 'client-by-its-package-name',
      comment:
        'The commands import @plantstore/client as its users do, the built package through ' +
        'the workspace link: a path into packages/ would compile the client into the server ' +
        'and use what the package does not export.',
      severity: 'error',
      from: { path: '^src/' },
      to: { path: '^packages/', dependencyTypesNot: ['aliased-workspace'] },
    },
  ],
  options: {
    // The workspace packages' built code is theirs: cruised from source (packages/*/src).
    doNotFollow: { path: ['node_modules', '^packages/[^/]+/dist/'] },
    // Keeps `import type` in the graph (the compiler would erase it) and marks it type-only.
    tsPreCompilationDeps: true,
  },
};
