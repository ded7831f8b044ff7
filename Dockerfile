# The worker's image (also used by the one-shot `migrate` service of docker-compose.yml):
# Node 20 running the TypeScript sources through tsx, no build step.
FROM node:20-slim

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

COPY . .

USER node
CMD ["npx", "tsx", "src/cli/worker.ts"]
