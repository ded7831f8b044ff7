# The worker's production image, in two stages. The build stage installs every dependency,
# generates the Prisma client and compiles src/ to dist/ (npm run build). The final stage holds
# production dependencies only, the compiled JavaScript (generated client included), the Lua
# scripts and the migrations, and runs as an unprivileged user. The same image runs the
# one-shot migration (`node dist/cli/migrate.js`, `node dist/cli/worker-role.js`) in
# docker-compose.yml and deploy/k8s/migrate-job.yaml.

FROM node:20-slim AS build
# Prisma's CLI probes the system's OpenSSL when it generates the client (postinstall).
RUN apt-get update \
 && apt-get install -y --no-install-recommends openssl ca-certificates \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /app
# Dependencies first, so that a source change does not reinstall them. The postinstall step
# (`prisma generate`) needs the schema and prisma.config.ts.
COPY package.json package-lock.json prisma.config.ts ./
COPY prisma ./prisma
RUN npm ci
COPY tsconfig.json tsconfig.build.json ./
COPY src ./src
RUN npm run build

FROM node:20-slim AS runtime
ENV NODE_ENV=production
WORKDIR /app
# Production dependencies only. --omit=optional as well: @prisma/client names the Prisma CLI
# and TypeScript as optional peers, and npm would otherwise install them (about 340 MB) even
# with --omit=dev. No install scripts: the client is already generated and compiled.
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --omit=optional --ignore-scripts --no-audit --no-fund \
 && npm cache clean --force
COPY --from=build /app/dist ./dist
COPY lua ./lua
COPY prisma/migrations ./prisma/migrations
# The `node` user of the base image, by number so that Kubernetes' runAsNonRoot can check it.
# The application files stay owned by root: the process cannot change its own code.
USER 1000:1000
# Health, readiness and Prometheus metrics (METRICS_PORT).
EXPOSE 9464
# node:20-slim has no curl: ask /healthz with node's own fetch.
HEALTHCHECK --interval=15s --timeout=5s --start-period=30s --retries=3 \
  CMD ["node", "-e", "fetch('http://127.0.0.1:' + (process.env.METRICS_PORT || 9464) + '/healthz').then((r) => process.exit(r.ok ? 0 : 1), () => process.exit(1))"]
# The worker's node flags (src/config/worker-runtime.ts): about half the resident memory of node's defaults.
CMD ["node", "--max-semi-space-size=4", "--heap-growing-percent=30", "--no-wasm-dynamic-tiering", "--no-wasm-tier-up", "--single-threaded-gc", "dist/cli/worker.js"]
