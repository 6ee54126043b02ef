export { type RunningSystem, type SystemOptions, startSystem } from "./system.js";
