# catalog-export as a container: the packed npm package installed globally, run as a non-root user.
#   docker build -t catalog-export .
#   docker run --rm -v ~/.here:/home/node/.here:ro catalog-export export --catalog HRN --layer ID --out s3://bucket/prefix
FROM node:24-bookworm-slim AS build
# Compilers only in case the native dependency (zstd-napi) has no prebuilt binary for the platform.
RUN apt-get update && apt-get install -y --no-install-recommends python3 make g++ && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY package.json package-lock.json ./
COPY scripts scripts
COPY src src
COPY pipelines pipelines
COPY config config
# npm ci builds dist/ (prepare); npm pack ships what an npm install would.
RUN npm ci && npm pack && npm install --global --omit=dev ./catalog-export-*.tgz

FROM node:24-bookworm-slim
COPY --from=build /usr/local/lib/node_modules/catalog-export /usr/local/lib/node_modules/catalog-export
RUN ln -s /usr/local/lib/node_modules/catalog-export/src/cli/bin.mjs /usr/local/bin/catalog-export
# The image's own non-root user (uid 1000); the install directory stays read-only to it.
USER node
WORKDIR /home/node
ENV NODE_ENV=production
ENTRYPOINT ["catalog-export"]
CMD ["--help"]
