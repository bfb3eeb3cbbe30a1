// Formatting and lint as in Effect's own repository: ESLint with @effect/eslint-plugin's dprint rule
// (2 spaces, no semicolons, double quotes, 120 columns, `function*(`), plus the recommended
// correctness rules of ESLint and typescript-eslint. `npm run lint` checks, `npm run format` fixes.
import * as effect from "@effect/eslint-plugin"
import js from "@eslint/js"
import tseslint from "typescript-eslint"

export default tseslint.config(
  { ignores: ["dist/**", "node_modules/**", "out/**", ".data/**", "test/bench/.tmp/**"] },
  {
    files: ["**/*.ts", "**/*.mjs"],
    extends: [js.configs.recommended, ...tseslint.configs.recommended, ...effect.configs.dprint],
    languageOptions: { parser: tseslint.parser, ecmaVersion: "latest", sourceType: "module" },
    rules: {
      // TypeScript checks names (typescript-eslint's advice); the .mjs entry points are a few lines.
      "no-undef": "off",
      // The code matches terminal escapes and control characters on purpose.
      "no-control-regex": "off",
      // Decoded wire data and test fixtures are `any` where a schema would add nothing.
      "@typescript-eslint/no-explicit-any": "off",
      "@typescript-eslint/no-unused-vars": ["error", {
        argsIgnorePattern: "^_",
        varsIgnorePattern: "^_",
        caughtErrors: "none"
      }],
      // Per-module imports (effect/Effect, not the effect barrel), as in Effect's own packages: the
      // barrel would tie every Effect module any command uses into the chunk every command loads.
      "@effect/no-import-from-barrel-package": ["error", { packageNames: ["effect"] }],
      "eqeqeq": ["error", "smart"],
      "no-self-compare": "error",
      "object-shorthand": "error",
      "@effect/dprint": ["error", {
        config: {
          indentWidth: 2,
          lineWidth: 120,
          semiColons: "asi",
          quoteStyle: "alwaysDouble",
          trailingCommas: "never",
          operatorPosition: "maintain",
          "arrowFunction.useParentheses": "force"
        }
      }]
    }
  }
)
